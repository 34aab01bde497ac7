"""ddgjax: discrete denoising diffusion for graph generation in JAX/Flax.

A reimplementation of Haefeli, Martinkus, Perraudin & Wattenhofer (2022),
"Diffusion Models for Graphs Benefit From Discrete State Spaces".
"""

__version__ = "0.1.0"
