"""Checkpoints: the only module that imports Orbax.

A run's workdir holds two managers, each keeping one checkpoint:

* ``checkpoints/latest``: the newest state, for resuming after a kill;
* ``checkpoints/best``: the state with the lowest training loss (the paper's
  model selection).

Each checkpoint stores the train state as a pytree of arrays plus a small JSON
``meta`` dict (epoch, step, loss). Orbax writes into a temporary directory and
renames it when complete, so an interrupted save never replaces a good
checkpoint.
"""
from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

KINDS = ("latest", "best")


class CheckpointError(RuntimeError):
    """No usable checkpoint where one was expected."""


def to_host(tree: Any) -> Any:
    """Replicated (possibly multi-host) arrays -> numpy, via this process's own copy."""

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return np.asarray(x.addressable_data(0))
        return np.asarray(x)

    return jax.tree_util.tree_map(one, tree)


def _manager(workdir: str, kind: str, create: bool = True) -> ocp.CheckpointManager:
    if kind not in KINDS:
        raise ValueError(f"unknown checkpoint kind {kind!r}; expected one of {KINDS}")
    path = os.path.abspath(os.path.join(workdir, "checkpoints", kind))
    options = ocp.CheckpointManagerOptions(max_to_keep=1, create=create,
                                           enable_async_checkpointing=False)
    return ocp.CheckpointManager(path, options=options)


def save(workdir: str, kind: str, step: int, state: Any, meta: dict) -> None:
    """Save ``state`` (a pytree of arrays) and ``meta`` as checkpoint ``kind`` at ``step``."""
    state = to_host(state)
    with _manager(workdir, kind) as mngr:
        if int(step) in mngr.all_steps():
            # Only after a kill between saving `best` and `latest`: the resumed
            # run recomputes the same step (deterministic trajectory) and
            # replaces it.
            mngr.delete(int(step))
        mngr.save(int(step), args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                     meta=ocp.args.JsonSave(meta)), force=True)
        mngr.wait_until_finished()


def latest_step(workdir: str, kind: str) -> int | None:
    """The step of checkpoint ``kind`` in ``workdir``, or None if there is none."""
    path = os.path.join(workdir, "checkpoints", kind)
    if not os.path.isdir(path):
        return None
    with _manager(workdir, kind, create=False) as mngr:
        return mngr.latest_step()


def restore(workdir: str, kind: str, target: Any) -> tuple[Any, dict]:
    """Restore checkpoint ``kind`` into the structure of ``target``; returns (state, meta).

    Raises CheckpointError naming the workdir if there is no checkpoint.
    """
    step = latest_step(workdir, kind)
    if step is None:
        raise CheckpointError(f"{workdir}: no '{kind}' checkpoint found "
                              f"(expected {os.path.join(workdir, 'checkpoints', kind)}/<step>); "
                              "train a model there first with train.py")
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, to_host(target))
    with _manager(workdir, kind, create=False) as mngr:
        out = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                         meta=ocp.args.JsonRestore()))
    _check_fits(out["state"], abstract, f"{workdir}: the '{kind}' checkpoint")
    return out["state"], dict(out["meta"])


def _check_fits(restored: Any, abstract: Any, what: str) -> None:
    """Raise CheckpointError if ``restored`` differs from ``abstract`` in structure or shapes.

    Orbax restores the saved shapes even where the target asks for others, so a
    checkpoint of another model size would otherwise fail later, deep in the model.
    """
    want, want_def = jax.tree_util.tree_flatten_with_path(abstract)
    got, got_def = jax.tree_util.tree_flatten_with_path(restored)
    if want_def != got_def:
        raise CheckpointError(f"{what} does not fit this config: its parameter tree differs")
    for (path, w), (_, g) in zip(want, got):
        if tuple(w.shape) != tuple(np.shape(g)):
            raise CheckpointError(
                f"{what} does not fit this config: {jax.tree_util.keystr(path)} has shape "
                f"{tuple(np.shape(g))} in the checkpoint, {tuple(w.shape)} in the model")


def restore_meta(workdir: str, kind: str) -> dict:
    """Only the JSON meta of checkpoint ``kind``."""
    step = latest_step(workdir, kind)
    if step is None:
        raise CheckpointError(f"{workdir}: no '{kind}' checkpoint found")
    with _manager(workdir, kind, create=False) as mngr:
        out = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return dict(out["meta"])
