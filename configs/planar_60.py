"""Planar-60 (the paper's set): our best recipe, 92.5 % valid at 32 steps (docs/results.md, "Planar-60").

    ddgjax-train --config planar_60 --workdir runs/planar60
    ddgjax-sample --workdir runs/planar60

The SPECTRE Planar-64 recipe with 10 blocks, sampled with Algorithm 2 in 32 steps on the
power:4 grid, 1024 graphs per seed. For the lowest MMDs instead (89.6 % valid at 3.3x the
floor): ``ddgjax-sample --workdir W --algorithm 1 --renoise_mix 0.7``.
"""
from ddgjax.configs import spectre_planar_64


def get_config():
    config = spectre_planar_64.get_config()
    config.data.source = "planar_60"
    config.model.ppgn.num_blocks = 10
    config.sample.num_steps = 32
    config.sample.grid = "power:4"
    config.sample.num_samples = 1024
    return config
