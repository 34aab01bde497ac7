"""Denoisers ``(adj, node_mask, t_index, noise_level) -> float32[B, N, N]``.

Both models share one call signature (see ``ddgjax.models.common`` for the
output convention) so the noise processes and training code never branch on
the model:

* ``PPGN`` (``ppgn.py``): conditioned on the raw ``noise_level`` (diagonal input channel).
* ``EDPGNN`` (``edp.py``): conditioned on ``t_index`` through per-level scale/bias.

The output is what the noise process asks for (bit flips: logits of ``A_0``).

Example::

    model = build_model("ppgn", num_timesteps=32, hidden=32, num_blocks=6)
    params = init_params(model, jax.random.key(0), max_nodes=20)
    logits = model.apply(params, adj, node_mask, t_index, noise_level)
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from ddgjax.kernels import KernelSettings
from ddgjax.models.edp import EDPGNN
from ddgjax.models.ppgn import PPGN

MODELS = {"ppgn": PPGN, "edp": EDPGNN}

# Fields that build_model sets itself (or that belong to Flax) and callers may not pass.
_RESERVED = {"parent", "name", "num_levels"}


def model_fields(name: str) -> tuple[str, ...]:
    """The keyword arguments ``build_model(name, ...)`` accepts."""
    cls = _lookup(name)
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _RESERVED)


def _lookup(name: str):
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid names: {sorted(MODELS)}")
    return MODELS[name]


def build_model(name: str, num_timesteps: int, **kwargs) -> nn.Module:
    """Build a denoiser by name.

    Args:
      name: ``"ppgn"`` or ``"edp"``.
      num_timesteps: T. EDP-GNN gets ``num_levels = T + 1`` conditioning rows (levels
        ``t = 0..T``); PPGN ignores it (it reads ``noise_level``).
      **kwargs: the model's fields (``model_fields(name)``), e.g. ``hidden=32``.

    Raises:
      ValueError: unknown ``name`` (the message lists the valid ones) or ``num_timesteps < 1``.
      TypeError: a keyword the model does not have (the message lists the valid ones).
    """
    cls = _lookup(name)
    if isinstance(num_timesteps, bool) or int(num_timesteps) != num_timesteps or num_timesteps < 1:
        raise ValueError(f"num_timesteps must be a positive integer, got {num_timesteps!r}")
    valid = model_fields(name)
    bad = sorted(k for k in kwargs if k not in valid)
    if bad:
        extra = " (num_levels is set from num_timesteps)" if "num_levels" in bad else ""
        raise TypeError(f"build_model({name!r}): unknown argument(s) {bad}{extra}; "
                        f"valid: {list(valid)}")
    if cls is EDPGNN:
        kwargs["num_levels"] = int(num_timesteps) + 1
    return cls(**kwargs)


COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def model_from_config(config, kernel_settings: KernelSettings | None = None,
                      cond_dim: int = 0) -> nn.Module:
    """The denoiser of ``config.model`` for ``config.diffusion.num_timesteps`` levels,
    conditioned on vectors of width ``cond_dim`` (``ddgjax.conditioning``; the run's data
    record holds it, ``conditioning.record_dim``; 0: unconditional).

    ``config.model[config.model.name]`` holds the model's fields (``model_fields``); for the
    PPGN ``kernels`` picks XLA or the Pallas kernels, whose ``kernel_settings`` (default:
    ``KernelSettings()``) come from the caller, not the config.

    Raises ValueError naming the config field for an unknown model or dtype.
    """
    name = config.model.name
    if name not in MODELS:
        raise ValueError(f"config.model.name: unknown model {name!r}; expected one of "
                         f"{sorted(MODELS)}")
    dtype = COMPUTE_DTYPES.get(config.model.compute_dtype)
    if dtype is None:
        raise ValueError(f"config.model.compute_dtype: expected one of {sorted(COMPUTE_DTYPES)}, "
                         f"got {config.model.compute_dtype!r}")
    kwargs = dict(config.model[name].to_dict())
    if kernel_settings is not None:
        if name != "ppgn":
            raise ValueError(f"kernel settings are the PPGN's, not {name!r}'s")
        kwargs["kernel_settings"] = kernel_settings
    if cond_dim:
        kwargs["cond_dim"] = int(cond_dim)
    return build_model(name, config.diffusion.num_timesteps, compute_dtype=dtype, **kwargs)


def _dummy_inputs(max_nodes: int):
    """Two all-real graphs of ``max_nodes`` nodes: the inputs ``init`` traces with."""
    return (jnp.zeros((2, max_nodes, max_nodes), jnp.float32), jnp.ones((2, max_nodes), bool),
            jnp.ones((2,), jnp.int32), jnp.full((2,), 0.25, jnp.float32))


# Graphs of this many nodes are what ``init_params`` traces with: the parameters' shapes
# and values do not depend on the node count (tests/test_models.py), so the forward pass
# that ``init`` runs need not be as large as the data's.
INIT_NODES = 4


def _init_here(model: nn.Module, key: jax.Array, max_nodes: int):
    # The Pallas kernels change no parameter, and on a GPU machine they would be lowered
    # for the host CPU that ``init_params`` initialises on, which runs them only
    # interpreted (a crash: "Only interpret mode is supported on CPU backend").
    if getattr(model, "kernels", "xla") != "xla":
        model = model.clone(kernels="xla")
    return model.init(key, *_dummy_inputs(min(max_nodes, INIT_NODES)))


def _host_cpu():
    """The CPU device to initialise parameters on: None where the default backend is the
    CPU already, or where JAX was started without its CPU platform."""
    if jax.default_backend() == "cpu":
        return None
    try:
        return jax.devices("cpu")[0]
    except RuntimeError:
        return None


def init_params(model: nn.Module, key: jax.Array, max_nodes: int):
    """Fresh parameters of ``model`` on the default device. Neither their shapes nor their
    values depend on ``max_nodes`` (``init`` traces graphs of at most ``INIT_NODES`` nodes).

    On a CPU backend ``model.init`` runs op by op, each op compiled once. On an accelerator
    it runs on the host CPU as one jitted program (op by op on the GPU took one H200 8.4 s
    of set-up for the Ego-small PPGN, on its host CPU 4.5 s, jitted less), and the
    parameters are moved over. So a seed starts from the same parameters on a CPU machine
    and on a GPU machine: both initialise on a CPU. Under a trace (``jit``,
    ``eval_shape``) it initialises in place.
    """
    cpu = _host_cpu()
    if cpu is None or isinstance(key, getattr(jax.core, "Tracer", ())):
        return _init_here(model, key, max_nodes)
    with jax.default_device(cpu):
        params = _init_on_host(model, jax.device_put(key, cpu), max_nodes)
    return jax.tree_util.tree_map(jnp.asarray, jax.device_get(params))


# One compiled program for the whole init on the host CPU (the same values as op by op:
# tests/test_models.py); an H200 machine's set-up spent ~3.7 s compiling the op-by-op
# init's ~90 small programs. Not on a CPU backend,
# where the op-by-op programs are shared by every model a process builds (the tests).
_init_on_host = jax.jit(_init_here, static_argnums=(0, 2))


def abstract_params(model: nn.Module, max_nodes: int = 4):
    """The parameter tree of ``model`` as ``jax.ShapeDtypeStruct`` leaves (no arrays made)."""
    return jax.eval_shape(lambda k: _init_here(model, k, max_nodes), jax.random.key(0))


__all__ = ["PPGN", "EDPGNN", "MODELS", "KernelSettings", "abstract_params", "build_model",
           "init_params", "model_fields", "model_from_config"]
