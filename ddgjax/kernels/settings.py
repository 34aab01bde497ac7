"""How the PPGN's Pallas kernels are chosen and launched: one frozen dataclass, passed in.

Nothing here reads the environment: a traced program depends only on its arguments, so a
jit cache keyed on the model (whose ``kernel_settings`` field holds these) is exact.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings

import jax

BACKENDS = ("auto", "triton", "mosaic")


@dataclasses.dataclass(frozen=True)
class KernelSettings:
    """Settings of the PPGN's Pallas kernels (``config.model.ppgn.kernels = "pallas"``).

    Attributes:
      backend: the kernels of the sampling forward: ``"mosaic"`` (persistent wgmma kernels,
        Hopper only), ``"triton"`` (any GPU), or ``"auto"`` (the default: ``mosaic`` on
        compute capability 9.x, ``triton`` elsewhere). Under differentiation the forward is
        Triton's either way (it writes the residuals the backward reads).
      interpret: run the kernels in Pallas' interpreters on a CPU (the tests; far slower
        than XLA). False: on a CPU the model takes its XLA path.
      fold_embed: fold the input embedding into the first block's kernels (they read the
        few input channels, zero-padded to 16, instead of ``hidden``).
      mosaic_readout: under ``mosaic``, the readout and residual layers as one kernel.
      readout_fold: that kernel also computes the output layer (writes the logits).
      pair_warp_specialized: the Mosaic pair-MLP kernel with one warpgroup per MLP and a
        third issuing the loads (the same results bit for bit).
      norm_kernel: under ``mosaic``, the instance norm as its own kernel instead of XLA's.
      max_tile_rows: the largest row tile of the Triton kernels (16, 32, 64 or 128).
      subtiles: row tiles per Triton program (the weights are loaded once per program).
      num_warps, num_stages: Triton's launch parameters.
    """

    backend: str = "auto"
    interpret: bool = False
    fold_embed: bool = True
    mosaic_readout: bool = True
    readout_fold: bool = True
    pair_warp_specialized: bool = True
    norm_kernel: bool = False
    max_tile_rows: int = 128
    subtiles: int = 1
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"KernelSettings.backend: expected one of {BACKENDS}, got "
                             f"{self.backend!r}")
        for name in ("interpret", "fold_embed", "mosaic_readout", "readout_fold",
                     "pair_warp_specialized", "norm_kernel"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"KernelSettings.{name}: expected True or False, got "
                                 f"{getattr(self, name)!r}")
        if self.max_tile_rows not in (16, 32, 64, 128):
            raise ValueError(f"KernelSettings.max_tile_rows: expected 16, 32, 64 or 128, got "
                             f"{self.max_tile_rows!r}")
        for name in ("subtiles", "num_warps", "num_stages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"KernelSettings.{name}: expected an integer >= 1, got "
                                 f"{value!r}")


def available(settings: KernelSettings) -> bool:
    """Whether the kernels run on the default backend: a GPU, or a CPU with ``interpret``."""
    backend = jax.default_backend()
    return backend == "gpu" or (backend == "cpu" and settings.interpret)


def backend_for_capability(capability: str) -> str:
    """The kernels for a CUDA compute capability such as ``"9.0"``: ``"mosaic"`` on Hopper
    (9.x: wgmma is its instruction), ``"triton"`` for anything else or anything unreadable."""
    try:
        major = int(str(capability).split(".")[0])
    except ValueError:
        return "triton"
    return "mosaic" if major == 9 else "triton"


def kernel_backend(settings: KernelSettings) -> str:
    """``settings.backend`` with ``"auto"`` resolved: by the first device's compute
    capability on a GPU, ``"triton"`` elsewhere."""
    if settings.backend != "auto":
        return settings.backend
    if jax.default_backend() != "gpu":
        return "triton"
    return backend_for_capability(getattr(jax.devices()[0], "compute_capability", "") or "")


def interpreted() -> bool:
    """Whether a kernel launched now runs interpreted (the default backend is the CPU)."""
    return jax.default_backend() == "cpu"


@functools.lru_cache(maxsize=None)
def _triton_importable() -> bool:
    try:
        from jax.experimental.pallas import triton  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _warn_no_triton() -> None:
    """Warns once per process (the cache) that the Triton kernels run their references."""
    warnings.warn(f"jax {jax.__version__} has no Pallas Triton backend "
                  "(jax.experimental.pallas.triton): the PPGN's Triton kernels run their "
                  "XLA references instead (same results; the Mosaic GPU kernels on "
                  "Hopper are not affected)", RuntimeWarning, stacklevel=3)


def triton_available() -> bool:
    """Whether Pallas' Triton backend is importable (JAX 0.11 deprecates it). Where it is
    not, the Triton kernels run their XLA references, the same function, and the first
    such call warns once."""
    if _triton_importable():
        return True
    _warn_no_triton()
    return False


def call_options(settings: KernelSettings) -> dict:
    """Keyword arguments of ``pl.pallas_call`` for a Triton kernel on the default backend."""
    if interpreted():
        return {"interpret": True}
    from jax.experimental.pallas import triton as pl_triton

    return {"compiler_params": pl_triton.CompilerParams(num_warps=settings.num_warps,
                                                        num_stages=settings.num_stages)}


def subtile_count(settings: KernelSettings, tiles: int) -> int:
    """Row tiles per Triton program: the largest count <= ``settings.subtiles`` that
    divides ``tiles`` (a program loads the weights once and runs its tiles in turn)."""
    return max(k for k in range(1, min(settings.subtiles, tiles) + 1) if tiles % k == 0)
