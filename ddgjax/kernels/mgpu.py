"""What the persistent Mosaic GPU (Hopper ``wgmma``) kernels share: the row tile, the CTA
plan, shared-memory layouts and the interpreter's differences.

On CPU the kernels run in Pallas' Mosaic GPU interpreter (``interpret=True``, the tests).
It has no transposed MMA operands and takes no register layouts, so there a transposed
operand is copied into a scratch buffer first and vectors are loaded plainly: the only
places the two paths differ.
"""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

TILE_ROWS = 64          # rows (entries) per tile: the MMAs' N


def smem_transforms(cols: int, dtype=jnp.bfloat16):
    """Tiling and swizzle of a shared-memory buffer whose minor axis has ``cols`` entries."""
    swizzle = plgpu.find_swizzle(cols * jnp.dtype(dtype).itemsize * 8)
    return (plgpu.TilingTransform((8, swizzle // jnp.dtype(dtype).itemsize)),
            plgpu.SwizzleTransform(swizzle))


def sm_count() -> int:
    """The first device's SM count (132 where the device does not say: an H100/H200)."""
    dev = jax.devices()[0]
    return int(getattr(dev, "core_count", 0) or 132)


def cta_count(tiles: int, max_ctas: int) -> int:
    """The largest CTA count <= ``max_ctas`` that divides ``tiles`` (equal shares)."""
    return max(d for d in range(1, min(tiles, max_ctas) + 1) if tiles % d == 0)


def fills_the_gpu(m_rows: int) -> bool:
    """Whether ``m_rows`` rows are whole tiles that give most SMs an equal share (at least
    three quarters of the SMs, or of the tiles where there are fewer)."""
    if m_rows % TILE_ROWS:
        return False
    tiles = m_rows // TILE_ROWS
    sms = sm_count()
    return cta_count(tiles, sms) >= 0.75 * min(sms, tiles)


def tile_plan(m_rows: int, max_ctas: int | None, kernel: str,
              tile_rows: int = TILE_ROWS) -> tuple[int, int, int]:
    """``(tiles, ctas, tiles_per_cta)`` for ``m_rows`` rows in tiles of ``tile_rows``:
    every CTA takes the same number of consecutive tiles (``cta_count``)."""
    if m_rows % tile_rows:
        raise ValueError(f"{kernel}: {m_rows} rows are not a multiple of {tile_rows}")
    tiles = m_rows // tile_rows
    ctas = cta_count(tiles, max_ctas or sm_count())
    return tiles, ctas, tiles // ctas


def _load_takes_index() -> bool:
    """Whether ``plgpu.load`` wants the index as an argument (JAX 0.10) or takes it from the
    ref (JAX 0.11 deprecates the argument; ``ref.at[idx]`` instead)."""
    idx = inspect.signature(plgpu.load).parameters.get("idx")
    return idx is not None and idx.default is inspect.Parameter.empty


_LOAD_TAKES_INDEX = _load_takes_index()


def load_vector(ref, layout, interpret: bool):
    """A shared-memory vector (or tile) in the register layout it will be used in (the
    interpreter takes no layouts)."""
    if interpret:
        return ref[...]
    return (plgpu.load(ref, (), layout=layout) if _LOAD_TAKES_INDEX
            else plgpu.load(ref, layout=layout))


def transposed(ref):
    """A transposed view of a 2-D shared-memory ref (``plgpu.transpose_ref``, which JAX
    0.11 deprecates, is this method)."""
    return ref.transpose((1, 0))


def transposed_operand(ref, scratch, interpret: bool):
    """``ref`` transposed as an MMA operand: a view on the GPU; in the interpreter, which
    has no transposed operands, a copy into ``scratch`` (returned)."""
    if interpret:
        scratch[...] = ref[...].T
        return scratch
    return transposed(ref)


def interpret_params() -> dict:
    """``plgpu.kernel``'s keyword arguments for the Mosaic GPU interpreter."""
    from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams
    return {"interpret": InterpretGPUParams()}
