"""How the PPGN's Pallas kernels are launched on the current backend.

GPU: compiled through Triton, with ``num_warps``/``num_stages`` from the environment
(``{PREFIX}_WARPS``, ``{PREFIX}_STAGES``; defaults 4 and 3, the fastest measured on an
H200, docs/benchmarks.md). CPU: Pallas' interpret mode (what the tests run). Any other
backend (TPU): the kernels are not used and the models take their XLA path.
"""
from __future__ import annotations

import os

import jax


def available() -> bool:
    """Whether the kernels can run on the default backend (GPU, or CPU interpreted)."""
    return jax.default_backend() in ("gpu", "cpu")


def call_options(env_prefix: str) -> dict:
    """Keyword arguments for ``pl.pallas_call`` on the default backend."""
    if jax.default_backend() == "cpu":
        return {"interpret": True}
    from jax.experimental.pallas import triton as pl_triton

    return {"compiler_params": pl_triton.CompilerParams(
        num_warps=int(os.environ.get(f"{env_prefix}_WARPS", 4)),
        num_stages=int(os.environ.get(f"{env_prefix}_STAGES", 3)))}
