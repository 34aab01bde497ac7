"""Checkpoints: the only module that imports Orbax.

A run's workdir holds up to three managers, each keeping one checkpoint:

* ``checkpoints/latest``: the newest state, for resuming after a kill;
* ``checkpoints/best``: the state with the lowest training loss (the paper's
  model selection);
* ``checkpoints/best_val``: with ``config.validation.every_epochs``, the state whose
  samples scored best on held-out graphs (``ddgjax.validation``).

Each checkpoint stores the train state (``step``, ``params``, ``ema_params``,
``opt_state``) as a pytree of arrays plus a small JSON ``meta`` dict (epoch,
step, loss). Orbax writes into a temporary directory and renames it when
complete, so an interrupted save never replaces a good checkpoint.

Training restores the whole state (``restore``); sampling restores only the
parameters (``restore_params``), without building an optimizer.
"""
from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from ddgjax.parallel import to_host

KINDS = ("latest", "best", "best_val")


class CheckpointError(RuntimeError):
    """No usable checkpoint where one was expected."""


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
    step = _existing_step(workdir, kind)
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


def restore_params(workdir: str, kind: str, abstract_params: Any) -> tuple[Any, Any, dict]:
    """Only the parameters of checkpoint ``kind``: ``(params, ema_params, meta)``.

    The state is read without a target (no optimizer is built); the two parameter
    trees are checked against ``abstract_params`` (``ddgjax.models.abstract_params``)
    and come back as numpy arrays in its structure. Raises CheckpointError naming
    the workdir if there is no checkpoint or it does not fit.
    """
    step = _existing_step(workdir, kind)
    with _manager(workdir, kind, create=False) as mngr:
        out = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(),
                                                         meta=ocp.args.JsonRestore()))
    state = out["state"]
    what = f"{workdir}: the '{kind}' checkpoint"
    if not isinstance(state, dict) or not {"params", "ema_params"} <= set(state):
        raise CheckpointError(f"{what} holds no 'params' and 'ema_params'")
    want_def = jax.tree_util.tree_structure(abstract_params)
    trees = []
    for name in ("params", "ema_params"):
        _check_same_paths(state[name], abstract_params, what)
        # Orbax returns plain dicts with the same key paths: rebuild the model's own
        # structure from the leaves, then check their shapes.
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(state[name])]
        tree = jax.tree_util.tree_unflatten(want_def, leaves)
        _check_fits(tree, abstract_params, what)
        trees.append(tree)
    return trees[0], trees[1], dict(out["meta"])


def _check_same_paths(restored: Any, abstract: Any, what: str) -> None:
    """Raise CheckpointError if the key paths of two parameter trees differ."""
    keys = lambda t: [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(t)[0]]
    if keys(restored) != keys(abstract):
        raise CheckpointError(f"{what} does not fit this config: its parameter tree differs")


def _existing_step(workdir: str, kind: str) -> int:
    step = latest_step(workdir, kind)
    if step is None:
        raise CheckpointError(f"{workdir}: no '{kind}' checkpoint found "
                              f"(expected {os.path.join(workdir, 'checkpoints', kind)}/<step>); "
                              "train a model there first with train.py")
    return step


def restore_meta(workdir: str, kind: str) -> dict:
    """Only the JSON meta of checkpoint ``kind``."""
    step = _existing_step(workdir, kind)
    with _manager(workdir, kind, create=False) as mngr:
        out = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return dict(out["meta"])
