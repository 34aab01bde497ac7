"""How the PPGN's Pallas kernels are launched on the current backend.

GPU: compiled through Triton, with ``num_warps``/``num_stages`` from the environment
(``{PREFIX}_WARPS``, ``{PREFIX}_STAGES``; defaults 4 and 3, the fastest measured on an
H200, docs/benchmarks.md) and the row tiles per program (``{PREFIX}_SUBTILES``, default
1; ``subtiles``). CPU: only with ``DDGJAX_PALLAS_INTERPRET=1`` (what the
tests set), in Pallas' interpret mode, which is far slower than XLA; otherwise, as on
any other backend (TPU), the kernels are not used and the models take their XLA path.
"""
from __future__ import annotations

import functools
import os
import warnings

import jax


def available() -> bool:
    """Whether the kernels run on the default backend (GPU; CPU interpreted on request)."""
    backend = jax.default_backend()
    return backend == "gpu" or (backend == "cpu"
                                and os.environ.get("DDGJAX_PALLAS_INTERPRET", "") == "1")


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
    """Whether Pallas' Triton backend is importable. JAX 0.11 deprecates it and a later JAX
    may drop it; then the kernels that need it (``pair_mlp_kernel``'s and
    ``mix_norm_kernel``'s Triton kernels: the sampling forward off Hopper, and the
    gradient's forward when training with ``pallas=true``) run their XLA references, the
    same function, and the first such call warns once. The Mosaic GPU kernels (sampling on
    Hopper) do not need it."""
    if _triton_importable():
        return True
    _warn_no_triton()
    return False


def kernel_backend() -> str:
    """Which kernels the PPGN's ``pallas`` path runs in its sampling forward: ``"mosaic"``
    (``pair_mlp_mgpu`` and ``mix_norm_mgpu``, persistent kernels on Hopper's wgmma; the
    default on GPUs of compute capability 9.x, i.e. H100/H200) or ``"triton"``
    (``pair_mlp_kernel``, ``mix_norm_kernel``; the default elsewhere, Blackwell included:
    wgmma is Hopper's instruction). Under differentiation (training) both kernels' forward
    is Triton's whichever is chosen (the pair MLPs' writes the hidden layers; the Mosaic
    mixing kernel made the bf16 train step slower, docs/benchmarks.md round 28).
    ``DDGJAX_PALLAS_BACKEND=triton|mosaic`` overrides the choice; it is read when a program
    is traced, so it must be set before the sampler is first compiled in a process. On CPU
    with ``DDGJAX_PALLAS_INTERPRET=1`` ``mosaic`` runs the Mosaic GPU interpreter (tests)."""
    want = os.environ.get("DDGJAX_PALLAS_BACKEND", "").strip().lower()
    if want not in ("", "triton", "mosaic"):
        raise ValueError(f"DDGJAX_PALLAS_BACKEND: expected 'triton' or 'mosaic', got {want!r}")
    if want:
        return want
    if jax.default_backend() != "gpu":
        return "triton"
    return backend_for_capability(getattr(jax.devices()[0], "compute_capability", "") or "")


def env_switch(name: str, default: bool) -> bool:
    """An on/off environment variable: ``"1"`` on, ``"0"`` off, unset ``default``;
    ValueError naming it for anything else."""
    value = os.environ.get(name, "1" if default else "0").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{name}: expected 0 or 1, got {value!r}")
    return value == "1"


def mosaic_readout() -> bool:
    """Whether the PPGN's readout and residual layer run as one Mosaic GPU kernel
    (``readout_mgpu``) under the ``mosaic`` backend: on by default (H200, round 29:
    sampling 1024 Planar-60 graphs 1.153 -> 1.021 s, sample quality unchanged);
    ``DDGJAX_MGPU_READOUT=0`` turns it off. Read when a program is traced."""
    return env_switch("DDGJAX_MGPU_READOUT", default=True)


def fold_embed() -> bool:
    """Whether a bfloat16 PPGN with Pallas kernels folds its input embedding into the first
    block (``PPGNBlockFused``'s ``embed``): the block's kernels read the few input channels
    (zero-padded to 16) with the embedding multiplied into their first weights, instead of
    a 128-channel embedding that XLA writes and both kernels read. On by default;
    ``DDGJAX_FOLD_EMBED=0`` turns it off. Read when a program is traced."""
    return env_switch("DDGJAX_FOLD_EMBED", default=True)


def fp8_product() -> bool:
    """Off by default (``DDGJAX_FP8_PRODUCT=1`` turns it on): the bfloat16 Pallas path
    stores the pair MLPs' outputs in float8 (e4m3) for the per-channel product. Under the
    ``mosaic`` backend the pair kernel writes float8 and XLA's product reads it, converting
    to bfloat16 inside its GEMM (``pair_mlp_kernel.pair_product_fp8``; its gradient is the
    bfloat16 path's); under ``triton`` the bf16 outputs are cast (``ppgn.channel_matmul_fp8``,
    one more pass). Round 32 found its samples as good as bf16's, round 37 the pair kernel
    and product 1.94 against 2.28 ms per block on an H200 (docs/benchmarks.md). Read when a
    program is traced."""
    return env_switch("DDGJAX_FP8_PRODUCT", default=False)


def pair_warp_specialized() -> bool:
    """Whether the Mosaic pair-MLP kernel runs warp-specialized (two compute warpgroups,
    one MLP each, and a load warpgroup; ``pair_mlp_mgpu._pair_mlps_warp_specialized``): on
    by default, ``DDGJAX_PAIR_WS=0`` turns it off. The same results bit for bit; on an H200
    1.386 against 1.48-1.54 ms alone and sampling 1024 Planar-60 graphs 0.965 against
    0.996 s (round 37), on an H100 level (1.522 against 1.525 ms alone, round 28). Read when
    a program is traced."""
    return env_switch("DDGJAX_PAIR_WS", default=True)


def fp8_activations_probe() -> bool:
    """Off by default (``DDGJAX_FP8_ACTIVATIONS_PROBE=1`` turns it on): a sample-quality
    probe for float8 activations, not a fast path. Under ``pallas`` each PPGN block rounds
    its per-channel product and its output (the next block's input, read by the pair,
    mixing and readout kernels) to float8 e4m3, saturating at +-448, and back, as kernels
    that stored those tensors in float8 would see them (``pair_mlp_mgpu.round_to_fp8``; extra XLA
    passes, so it is slower). Read when a program is traced."""
    return env_switch("DDGJAX_FP8_ACTIVATIONS_PROBE", default=False)


def norm_kernel() -> bool | None:
    """Whether the PPGN's instance norm, under the ``mosaic`` backend, runs as its own
    Mosaic GPU kernel (``norm_mgpu``: reads the mixing kernel's channels-first output and
    writes the block's output rows first, the transpose done by an MMA against the
    identity) instead of XLA's transpose fusion. ``DDGJAX_NORM_KERNEL=1`` on, ``0`` off;
    unset (None): on exactly where the block outputs are float8 (``fp8_activations`` ``1``,
    ``weights``, ``weights_y``), where the kernel rounds once where XLA's path rounds
    through bfloat16, and where it measured level with XLA's fusion (float8 in) or faster
    (bf16 in: 0.60 against 0.73 ms per pass; H200, round 64, docs/benchmarks.md). Under differentiation the XLA reference runs either way. Read
    when a program is traced."""
    if os.environ.get("DDGJAX_NORM_KERNEL", "").strip() == "":
        return None
    return env_switch("DDGJAX_NORM_KERNEL", default=False)


def ctas_per_sm(kernel: str, default: int = 1) -> int:
    """CTAs per SM for a persistent Mosaic kernel that can share an SM (``kernel``:
    ``"NORM"``, ``norm_mgpu``; ``"MIX"``, ``mix_norm_mgpu``; ``"READOUT"``, ``readout_mgpu``):
    ``DDGJAX_{kernel}_CTAS_PER_SM``, a whole number >= 1; unset, the kernel's ``default``
    (the fastest measured: ``norm_mgpu`` 3 with a float8 input or output, whose shared
    memory then fits three CTAs, else 2; the mixing and readout kernels 2 with float8
    weights, whose shared memory then fits two CTAs, else 1; H200, rounds 64-65). A CTA
    takes its tiles one after the other, so one CTA per SM leaves the SM idle at every
    tile's load and store; more CTAs than fit run in waves (the same work). Read when a
    program is traced."""
    name = f"DDGJAX_{kernel}_CTAS_PER_SM"
    value = os.environ.get(name, "").strip()
    if value == "":
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name}: expected a whole number >= 1, got {value!r}")
    return int(value)


def mix_one_accumulator() -> bool:
    """Whether the Mosaic mixing kernel with float8 weights adds both of its products in one
    accumulator (``mix_norm_mgpu.mix_with_partial_sums``' ``one_accumulator``:
    ``DDGJAX_MIX_ONE_ACC=1``) instead of one each. Off by default: on an H200 (round 80,
    docs/benchmarks.md) it took the kernel from 1.162 to 1.132 ms and the ``weights_y``
    sampling row from 0.731 to 0.724-0.728 s, within what a setting moves between calls,
    and it rounds a column of ``wx`` ~146x smaller than ``wp``'s more coarsely
    (``pair_mlp_mgpu.mixing_fp8_column_scales``). Read when a program is traced."""
    return env_switch("DDGJAX_MIX_ONE_ACC", default=False)


def readout_fold() -> bool | None:
    """Whether the Mosaic readout kernel also computes the PPGN's output layer
    (``readout_mgpu.readout``'s ``w_out``: it writes the logits instead of the 128-channel
    residual output that XLA would read back for them): ``DDGJAX_READOUT_FOLD=1`` on, ``0``
    off; unset (``None``) the PPGN decides: on where the readout reads bf16 block outputs
    (H200, rounds 82-83: sampling 1024 Planar-60 graphs 0.955 and 0.967 s against 0.966
    and 0.982 s), off under float8 weights (0.725 against 0.718 s: there two readout CTAs
    share an SM, and the fold's MMA and shared memory cost more than its saved bytes).
    Read when a program is traced."""
    value = os.environ.get("DDGJAX_READOUT_FOLD", "").strip()
    if value == "":
        return None
    return env_switch("DDGJAX_READOUT_FOLD", default=False)


def _norm_kernel_record():
    """``norm_kernel`` for the records: ``"auto"`` where it is unset."""
    value = norm_kernel()
    return "auto" if value is None else value


def _env_or_unset(name: str):
    """An environment variable for the records: its value, or ``"unset"``."""
    return lambda: os.environ.get(name, "").strip() or "unset"


FP8_ACTIVATION_MODES = ("0", "1", "prod", "weights", "weights_y")


def fp8_activations() -> str:
    """Which activations a bfloat16 PPGN under the ``mosaic`` backend stores in float8 e4m3
    (saturated at +-448), read by the Mosaic kernels as float8 (converted to float16 on
    chip: ``pair_mlp_mgpu.fp8_tile_as_f16``, ``fp8_tile_to_f16_smem``):
    ``DDGJAX_FP8_ACTIVATIONS=0`` (the default) none; ``1`` each block's output (the next
    block's input, read by the pair, mixing and readout kernels) and its per-channel
    product; ``prod`` the product only (read by the mixing kernel); ``weights`` as ``1``,
    and the weights that multiply a float8 block output (the pair MLPs' first layers, the
    mixing layer's ``x`` part, the readout's block terms) rounded to float8 with a
    power-of-two scale per output channel (``pair_mlp_mgpu.round_weights_to_fp8``), so that
    those products are float8 x float8 MMAs with no conversion on chip (where the Mosaic
    kernels take the shapes; an XLA fallback of the mixing layer or the readout keeps the
    weights as they are); ``weights_y`` as ``weights``, and the mixing layer hands the norm
    its output less the bias (which the norm cancels) in float8 too
    (``mix_norm_kernel.mix_with_stats``' ``fp8_out``), so the norm pass reads half the bytes.
    Any of them implies
    ``fp8_product``'s float8 pair outputs. ``1`` rounds as ``fp8_activations_probe`` does
    (from float16 instead of bfloat16 weights). Sampling only: the float8 product has no
    gradient. On an H200 (docs/benchmarks.md) ``1`` and ``prod`` are little faster (round 57:
    the kernels convert on chip at about the cost of the bytes they save); ``weights`` and
    ``weights_y`` are (rounds 60-65: sampling 1024 Planar-60 graphs 0.78 and, with the norm
    kernel and CTAs sharing SMs, 0.70 s against 0.88 s). Read when a program is traced."""
    value = os.environ.get("DDGJAX_FP8_ACTIVATIONS", "0").strip().lower()
    if value not in FP8_ACTIVATION_MODES:
        raise ValueError(f"DDGJAX_FP8_ACTIVATIONS: expected one of {FP8_ACTIVATION_MODES}, "
                         f"got {value!r}")
    return value


_TRACE_SETTINGS = (("backend", kernel_backend), ("mgpu_readout", mosaic_readout),
                   ("fold_embed", fold_embed), ("fp8_product", fp8_product),
                   ("pair_warp_specialized", pair_warp_specialized),
                   ("fp8_activations_probe", fp8_activations_probe),
                   ("fp8_activations", fp8_activations), ("norm_kernel", _norm_kernel_record),
                   ("mix_one_accumulator", mix_one_accumulator),
                   ("readout_fold", _env_or_unset("DDGJAX_READOUT_FOLD")),
                   *((f"{k.lower()}_ctas_per_sm", _env_or_unset(f"DDGJAX_{k}_CTAS_PER_SM"))
                     for k in ("NORM", "MIX", "READOUT")))


def trace_settings() -> tuple:
    """The environment settings a traced PPGN program depends on (for cache keys)."""
    return tuple(read() for _, read in _TRACE_SETTINGS)


def trace_settings_record() -> dict:
    """``trace_settings`` by name, for the records of samples and benchmarks."""
    return {name: read() for name, read in _TRACE_SETTINGS}


def backend_for_capability(capability: str) -> str:
    """The default kernels for a CUDA compute capability such as ``"9.0"``: ``"mosaic"``
    on Hopper (9.x), ``"triton"`` for anything else or anything unreadable."""
    try:
        major = int(str(capability).split(".")[0])
    except ValueError:
        return "triton"
    return "mosaic" if major == 9 else "triton"


def call_options(env_prefix: str) -> dict:
    """Keyword arguments for ``pl.pallas_call`` on the default backend."""
    if jax.default_backend() == "cpu":
        return {"interpret": True}
    from jax.experimental.pallas import triton as pl_triton

    return {"compiler_params": pl_triton.CompilerParams(
        num_warps=int(os.environ.get(f"{env_prefix}_WARPS", 4)),
        num_stages=int(os.environ.get(f"{env_prefix}_STAGES", 3)))}


def subtiles(env_prefix: str, tiles: int) -> int:
    """Row tiles per program (``{PREFIX}_SUBTILES``, default 1): a program loads the
    weights once and runs that many consecutive tiles, so the weights are read from L2
    once per group instead of once per tile (per 128-row tile the pair-MLP kernel reads
    128 KB of weights against 32 KB of its input). The largest count <= the setting that
    divides ``tiles``."""
    want = max(1, int(os.environ.get(f"{env_prefix}_SUBTILES", 1)))
    return max(k for k in range(1, min(want, tiles) + 1) if tiles % k == 0)

