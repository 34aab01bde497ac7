"""Optional Pallas kernels for the PPGN (``config.model.ppgn.kernels = "pallas"``).

They make bfloat16 sampling about 2.4x faster on an H200 and compute the XLA block's
function with its parameters; training's speed comes from the XLA fused block, not from
them. Two families: Triton kernels (``pair_mlp``, ``mix_norm``: any GPU, and the forward
under differentiation) and persistent Mosaic GPU kernels for Hopper (``*_mgpu``: the
sampling forward). Which ones run is set by a ``KernelSettings`` passed to the model, never
by the environment. On a CPU they run only interpreted (``KernelSettings(interpret=True)``,
the tests); otherwise, as on any backend but a GPU, the PPGN takes its XLA path.

The PPGN calls ``ddgjax.kernels.ppgn`` (``takes_block``, ``block``, ``takes_readout``,
``readout``, ``folds_embedding``, ``fold_input``) and nothing else.
"""
from ddgjax.kernels.settings import KernelSettings

__all__ = ["KernelSettings"]
