"""Denoisers ``(adj, node_mask, t_index, beta_bar) -> float32[B, N, N] logits``.

Both models share one call signature (see ``ddgjax.models.common`` for the
output convention) so the diffusion and training code never branch on the model:

* ``PPGN`` (``ppgn.py``): conditioned on the raw ``beta_bar`` (diagonal input channel).
* ``EDPGNN`` (``edp.py``): conditioned on ``t_index`` through per-level scale/bias.

Example::

    model = build_model("ppgn", num_timesteps=32, hidden=32, num_blocks=6)
    params = model.init(jax.random.key(0), adj, node_mask, t_index, beta_bar)
    logits = model.apply(params, adj, node_mask, t_index, beta_bar)
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn

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
      name: one of ``"ppgn"``, ``"edp"``.
      num_timesteps: T. EDP-GNN gets ``num_levels = T + 1`` conditioning rows (levels
        ``t = 0..T``); PPGN ignores it (it reads ``beta_bar``).
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


__all__ = ["PPGN", "EDPGNN", "MODELS", "build_model", "model_fields"]
