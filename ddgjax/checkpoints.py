"""Checkpoints: the only module that imports Orbax.

A run's workdir holds up to three managers, each keeping one checkpoint:

* ``checkpoints/latest``: the newest state, for resuming after a kill;
* ``checkpoints/best``: the state with the lowest training loss (the paper's
  model selection);
* ``checkpoints/best_val``: with ``config.validation.every_epochs``, the state whose
  samples scored best on held-out graphs (``ddgjax.validation``).

Each checkpoint stores the train state (``step``, ``params``, ``ema_params``,
``opt_state``) plus a small JSON ``meta`` dict (epoch, step, loss). Orbax writes
into a temporary directory and renames it when complete, and a manager deletes its
previous checkpoint only after that rename, so an interrupted save never replaces a
good checkpoint.

On disk a state is **packed**: each top-level field is stored as one flat array per
dtype, and a JSON ``layout`` item records every leaf's key path, shape and dtype in
order, and each field's node count (which tells apart optimizer states with the same
leaves, such as Adam's and AdamW's). Orbax's cost per save grows with the number of
arrays (a few hundred leaves for a PPGN state), so this makes a save several times
cheaper (docs/performance.md). Restoring checks the layout against
the model's tree leaf by leaf and names the first leaf that differs. Checkpoints
written before the packed layout (no ``layout`` item) are still read.

Training restores the whole state (``restore``); sampling restores only the
parameters (``restore_params``), without building an optimizer. A checkpoint
whose files cannot be read (truncated, corrupt) raises
:class:`UnreadableCheckpointError` naming its directory, once (the reads Orbax had in
flight are let finish quietly: ``_echoes_dropped``); :func:`set_aside` moves
it out of its manager so training can go on from another one. A save holds
SIGINT/SIGTERM until it is complete (``ddgjax.interrupts.deferred``).

The training loop saves through a :class:`CheckpointWriter` instead (``best``,
``latest``, and ``best_val`` from model selection by samples): one
asynchronous manager per kind stays open for the run, and ``save`` returns as
soon as the state is copied to the host and the write is under way (the files
are written by background threads, with the same temporary directory and
rename). Its ``save``, ``wait`` and ``close`` hold SIGINT/SIGTERM while they
run; a signal that arrives while a write is in flight does not stop it, and the
run waits for it (``wait``/``close``) before it reads a checkpoint, reports
where it stopped or returns. Until then a kind's previous checkpoint is the one
on disk; a write that fails (or a process killed outright) leaves it in place.
"""
from __future__ import annotations

import os
import shutil
import sys
import zlib
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from ddgjax.interrupts import deferred
from ddgjax.parallel import to_host
from ddgjax.quiet_reads import echoes_dropped, settle_failed_read

KINDS = ("latest", "best", "best_val")


class CheckpointError(RuntimeError):
    """No usable checkpoint where one was expected."""


class UnreadableCheckpointError(CheckpointError):
    """A checkpoint's files cannot be read; ``path`` is its directory."""

    def __init__(self, path: str, reason: BaseException):
        super().__init__(f"{path}: unreadable checkpoint ({type(reason).__name__}: "
                         f"{_first_line(reason)})")
        self.path = path


def _first_line(error: BaseException) -> str:
    """The first line of an error's text (at most 200 characters), or its type's name."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def checkpoint_dir(workdir: str, kind: str, step: int) -> str:
    """The directory of checkpoint ``kind`` at ``step``."""
    return os.path.join(workdir, "checkpoints", kind, str(int(step)))

def _manager(workdir: str, kind: str, create: bool = True,
             asynchronous: bool = False) -> ocp.CheckpointManager:
    if kind not in KINDS:
        raise ValueError(f"unknown checkpoint kind {kind!r}; expected one of {KINDS}")
    path = os.path.abspath(os.path.join(workdir, "checkpoints", kind))
    # Each manager's barriers get their own names (kind and directory): with several
    # processes, the background threads of concurrent asynchronous managers (best and
    # latest; the runs of train_seeds, which save the same step) otherwise meet at one
    # barrier name and fail ("Barrier ... is already ongoing").
    options = ocp.CheckpointManagerOptions(
        max_to_keep=1, create=create, enable_async_checkpointing=asynchronous,
        multiprocessing_options=ocp.options.MultiprocessingOptions(
            barrier_sync_key_prefix=f"ddgjax_{kind}_{zlib.crc32(path.encode()):08x}"))
    return ocp.CheckpointManager(path, options=options)


def _start_save(mngr: ocp.CheckpointManager, step: int, state: Any, meta: dict) -> None:
    """Start saving ``state`` (host arrays) and ``meta`` at ``step`` in ``mngr``; with an
    asynchronous manager the files are written after it returns. A step already on disk
    is kept as it is (nothing is written)."""
    packed, layout = pack_state(state)  # before anything on disk changes: it may raise
    if int(step) in mngr.all_steps():
        # Only after a kill between saving `best` and `latest`: the resumed run
        # recomputes a step that is already on disk, complete (Orbax lists finalized
        # steps only). It is kept: deleting it to write the step again would leave the
        # kind without any checkpoint until the new write were finalized (one kept per
        # kind), and a second kill in that window would lose it.
        return
    mngr.save(int(step), args=ocp.args.Composite(state=ocp.args.StandardSave(packed),
                                                 meta=ocp.args.JsonSave(meta),
                                                 layout=ocp.args.JsonSave(layout)), force=True)


LAYOUT_FORMAT = "ddgjax-packed-1"


class _CorruptLayout(ValueError):
    """A packed checkpoint whose arrays or layout contradict each other."""


def _key_part(key: Any) -> str | int:
    """One step of a key path as JSON: a dict key, an attribute name or an index."""
    for attr in ("name", "key", "idx"):
        if hasattr(key, attr):
            value = getattr(key, attr)
            return value if isinstance(value, int) else str(value)
    return str(key)


def _top_level(state: Any) -> tuple[list, list, Any]:
    """``(names, children, treedef)`` of a state's top level (a dataclass's fields, a
    mapping's items, a tuple's entries): ``tree_unflatten(treedef, children)`` rebuilds it."""
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(
        state, is_leaf=lambda x: x is not state)
    return [str(_key_part(path[0])) for path, _ in with_paths], [x for _, x in with_paths], treedef


def _leaf_layout(tree: Any) -> list:
    """``[[key path parts], shape, dtype]`` of a tree's leaves (arrays or shape-dtype
    structs) in flatten order."""
    out = []
    for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]:
        dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
        out.append([[_key_part(k) for k in path], list(np.shape(x)), str(np.dtype(dtype))])
    return out


def _node_count(tree: Any) -> int:
    """Nodes of a tree's structure, empty ones (optax's ``EmptyState``) included: two
    optimizer states with the same leaves but other wrappers (Adam, AdamW) differ here."""
    return jax.tree_util.tree_structure(tree).num_nodes


def pack_state(state: Any) -> tuple[dict, dict]:
    """``state`` (host arrays) -> ``(packed, layout)``: per top-level field, one flat
    array per dtype (the leaves raveled and concatenated in flatten order), and the JSON
    layout that ``unpack_field`` needs to cut them apart again and to check them."""
    packed, fields, nodes = {}, {}, {}
    for name, sub in zip(*_top_level(state)[:2]):
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(sub)]
        fields[name], nodes[name] = _leaf_layout(sub), _node_count(sub)
        packed[name] = {dt: np.concatenate([x.ravel() for x in leaves if str(x.dtype) == dt])
                        for dt in sorted({str(x.dtype) for x in leaves})}
    return packed, {"format": LAYOUT_FORMAT, "fields": fields, "nodes": nodes}


def unpack_field(packed_field: Mapping, layout: Mapping, name: str, like: Any,
                 what: str) -> Any:
    """Field ``name`` of a packed checkpoint, cut back into the structure of ``like`` (a
    tree of arrays or shape-dtype structs), each leaf cast to ``like``'s dtype.

    Raises CheckpointError ("does not fit this config") naming the field and the first
    leaf whose key path or shape differs, or the field's structure if only that does
    (e.g. Adam against AdamW), and ``_CorruptLayout`` if the packed arrays do not match
    the checkpoint's own layout.
    """
    try:
        saved = [(list(p), list(shape), str(dt)) for p, shape, dt in layout["fields"][name]]
        saved_nodes = layout.get("nodes", {}).get(name)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise _CorruptLayout(f"layout of field {name!r}: {e!r}") from e
    want = [(list(p), list(shape), dt) for p, shape, dt in _leaf_layout(like)]
    show = lambda parts: name + "".join(f"[{p!r}]" for p in parts)
    for (w_path, w_shape, _), (s_path, s_shape, _) in zip(want, saved):
        if w_path != s_path:
            raise CheckpointError(f"{what} does not fit this config: its tree differs at "
                                  f"{show(s_path)} (the model has {show(w_path)} there)")
        if w_shape != s_shape:
            raise CheckpointError(f"{what} does not fit this config: {show(w_path)} has shape "
                                  f"{tuple(s_shape)} in the checkpoint, {tuple(w_shape)} in "
                                  "the model")
    if len(want) != len(saved):
        more, fewer = ("checkpoint", "model") if len(saved) > len(want) else ("model", "checkpoint")
        extra = (saved if len(saved) > len(want) else want)[min(len(want), len(saved))][0]
        raise CheckpointError(f"{what} does not fit this config: the {more} has more leaves "
                              f"in {name} than the {fewer} (first: {show(extra)})")
    if saved_nodes is not None and saved_nodes != _node_count(like):
        raise CheckpointError(f"{what} does not fit this config: its {name} tree has another "
                              f"structure ({saved_nodes} nodes, the config's {_node_count(like)}; "
                              "e.g. another optimizer)")
    leaf_sizes = [int(np.prod(shape, dtype=np.int64)) for _, shape, _ in saved]
    sizes = {}
    for (_, _, dt), size in zip(saved, leaf_sizes):
        sizes[dt] = sizes.get(dt, 0) + size
    arrays = {dt: np.asarray(v).reshape(-1) for dt, v in packed_field.items()}
    if sizes != {dt: a.size for dt, a in arrays.items()}:
        raise _CorruptLayout(f"the packed arrays of {name} do not match its layout")
    offsets = dict.fromkeys(arrays, 0)
    leaves = []
    for (_, shape, dt), (_, _, want_dt), size in zip(saved, want, leaf_sizes):
        leaf = arrays[dt][offsets[dt]:offsets[dt] + size].reshape(shape)
        leaves.append(leaf.astype(want_dt, copy=False))   # as Orbax casts to a target
        offsets[dt] += size
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(like), leaves)


def _unpack(workdir: str, kind: str, step: int, out: dict, like: dict, what: str) -> dict:
    """``{name: unpack_field(...)}`` for the fields of ``like``; a packed checkpoint that
    contradicts itself raises UnreadableCheckpointError naming its directory."""
    try:
        if not isinstance(out["state"], Mapping):
            raise _CorruptLayout("its state is not a mapping of fields")
        return {name: unpack_field(out["state"].get(name) or {}, out["layout"], name, sub, what)
                for name, sub in like.items()}
    except _CorruptLayout as e:
        raise UnreadableCheckpointError(checkpoint_dir(workdir, kind, step), e) from e


def save(workdir: str, kind: str, step: int, state: Any, meta: dict) -> None:
    """Save ``state`` (a pytree of arrays) and ``meta`` as checkpoint ``kind`` at ``step``;
    returns once the checkpoint is complete on disk."""
    state = to_host(state)
    with deferred(), _manager(workdir, kind) as mngr:
        _start_save(mngr, step, state, meta)
        mngr.wait_until_finished()


class CheckpointWriter:
    """Asynchronous checkpoint saves into one workdir, for the life of a training run.

    One Orbax manager per kind (opened at its first save) stays open until
    :meth:`close`. :meth:`save` returns once the write is under way; at every
    moment each kind has a complete checkpoint on disk (the previous one until the
    new one is finalized). Checkpoints of this workdir are read only after
    :meth:`wait` or :meth:`close` (the module's readers open their own managers,
    and see the previous checkpoint while a write is in flight). A write that
    failed in the background raises from the next ``save`` of its kind, ``wait``
    or ``close``. As a context manager it closes on exit.
    """

    def __init__(self, workdir: str):
        self.workdir = workdir
        self._managers: dict[str, ocp.CheckpointManager] = {}
        self._closed = False

    def save(self, kind: str, step: int, state: Any, meta: dict) -> None:
        """Start saving ``state`` and ``meta`` as checkpoint ``kind`` at ``step``, after
        the previous save of ``kind`` has finished; returns while the files are written.
        The caller may change ``state`` afterwards: it is copied to the host here, and
        Orbax copies host arrays before its save returns (``NumpyHandler``'s default)."""
        if self._closed:
            raise CheckpointError(f"{self.workdir}: checkpoint writer used after close()")
        state = to_host(state)
        with deferred():
            mngr = self._manager(kind)
            mngr.wait_until_finished()
            _start_save(mngr, step, state, meta)

    def wait(self) -> None:
        """Block until every save started so far is complete on disk (or raise its error)."""
        with deferred():
            _each(lambda mngr: mngr.wait_until_finished(), self._managers.values())

    def close(self) -> None:
        """:meth:`wait`, then release the managers; the writer takes no more saves.
        Every manager is closed even if one raises (the first error is raised)."""
        with deferred():
            managers, self._managers, self._closed = list(self._managers.values()), {}, True
            _each(lambda mngr: mngr.close(), managers)

    def _manager(self, kind: str) -> ocp.CheckpointManager:
        if kind not in self._managers:
            self._managers[kind] = _manager(self.workdir, kind, asynchronous=True)
        return self._managers[kind]

    def close_after_error(self) -> None:
        """:meth:`close` while another error (e.g. a KeyboardInterrupt) ends the run: a
        failed write is reported on stderr instead of raised, so that error goes on."""
        try:
            self.close()
        except Exception as e:  # noqa: BLE001 - Orbax and TensorStore raise many types
            print(f"warning: {self.workdir}: a checkpoint write failed ({type(e).__name__}: "
                  f"{_first_line(e)}); that kind keeps its previous checkpoint", file=sys.stderr)

    def __enter__(self) -> "CheckpointWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """:meth:`close`, or :meth:`close_after_error` when the block raised."""
        if exc_type is None:
            self.close()
        else:
            self.close_after_error()


def _each(action, managers) -> None:
    """``action(mngr)`` for every manager, even after one raises; then raise the first error."""
    errors = []
    for mngr in managers:
        try:
            action(mngr)
        except Exception as e:  # noqa: BLE001 - Orbax and TensorStore raise many types
            errors.append(e)
    if errors:
        raise errors[0]


def latest_step(workdir: str, kind: str) -> int | None:
    """The step of checkpoint ``kind`` in ``workdir``, or None if there is none."""
    path = os.path.join(workdir, "checkpoints", kind)
    if not os.path.isdir(path):
        return None
    with _manager(workdir, kind, create=False) as mngr:
        return mngr.latest_step()


def restore(workdir: str, kind: str, target: Any) -> tuple[Any, dict]:
    """Restore checkpoint ``kind`` into the structure of ``target``; returns (state, meta).

    Raises CheckpointError naming the workdir if there is no checkpoint or it
    does not fit ``target``, UnreadableCheckpointError if its files cannot be read.
    """
    step = _existing_step(workdir, kind)
    abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, to_host(target))
    what = f"{workdir}: the '{kind}' checkpoint"
    if _is_packed(workdir, kind, step):
        out = _read_raw(workdir, kind, step)
        names, children, treedef = _top_level(abstract)
        saved = out["layout"].get("fields") if isinstance(out["layout"], Mapping) else None
        if not isinstance(saved, Mapping):
            raise UnreadableCheckpointError(checkpoint_dir(workdir, kind, step),
                                            ValueError("layout: no 'fields'"))
        if sorted(saved) != sorted(names):
            raise CheckpointError(f"{what} does not fit this config: its fields are "
                                  f"{sorted(saved)}, the model's {sorted(names)}")
        fields = _unpack(workdir, kind, step, out, dict(zip(names, children)), what)
        return jax.tree_util.tree_unflatten(treedef, [fields[n] for n in names]), dict(out["meta"])
    misfit = None
    with echoes_dropped():
        try:
            with _manager(workdir, kind, create=False) as mngr:
                out = mngr.restore(step, args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
        except Exception as e:  # noqa: BLE001 - Orbax and TensorStore raise many types
            misfit = CheckpointError(f"{workdir}: the '{kind}' checkpoint does not fit this "
                                     f"config ({type(e).__name__}: {_first_line(e)})")
        if misfit is not None:  # (outside the except: settle_failed_read says why)
            settle_failed_read()
    if misfit is not None:
        # Unreadable files, or a tree that does not fit the target? Reading the
        # checkpoint without a target tells them apart.
        _read_raw(workdir, kind, step)
        raise misfit
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
    the workdir if there is no checkpoint or it does not fit,
    UnreadableCheckpointError if its files cannot be read.
    """
    step = _existing_step(workdir, kind)
    out = _read_raw(workdir, kind, step)
    state = out["state"]
    what = f"{workdir}: the '{kind}' checkpoint"
    if not isinstance(state, dict) or not {"params", "ema_params"} <= set(state):
        raise CheckpointError(f"{what} holds no 'params' and 'ema_params'")
    if "layout" in out:
        trees = _unpack(workdir, kind, step, out,
                        {"params": abstract_params, "ema_params": abstract_params}, what)
        return trees["params"], trees["ema_params"], dict(out["meta"])
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


def _read_raw(workdir: str, kind: str, step: int) -> dict:
    """State (as saved, no target) and meta of one checkpoint; UnreadableCheckpointError
    naming its directory if any of its files cannot be read."""
    items = dict(state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore())
    if _is_packed(workdir, kind, step):
        items["layout"] = ocp.args.JsonRestore()
    unreadable = None
    with echoes_dropped():
        try:
            with _manager(workdir, kind, create=False) as mngr:
                out = mngr.restore(step, args=ocp.args.Composite(**items))
            out = {name: out[name] for name in items}
            if "layout" in out and not isinstance(out["layout"], Mapping):
                raise ValueError("layout: expected a JSON object")
        except Exception as e:  # noqa: BLE001 - Orbax and TensorStore raise many types
            unreadable = UnreadableCheckpointError(checkpoint_dir(workdir, kind, step), e)
        if unreadable is not None:  # (outside the except: settle_failed_read says why)
            settle_failed_read()
    if unreadable is not None:
        raise unreadable
    if "layout" in out and out["layout"].get("format") != LAYOUT_FORMAT:
        raise CheckpointError(f"{checkpoint_dir(workdir, kind, step)}: checkpoint layout "
                              f"{out['layout'].get('format')!r}, this ddgjax reads "
                              f"{LAYOUT_FORMAT!r} (written by another version of ddgjax?)")
    return out


def _is_packed(workdir: str, kind: str, step: int) -> bool:
    """Whether checkpoint ``kind`` at ``step`` has the packed layout (a ``layout`` item)."""
    return os.path.isdir(os.path.join(checkpoint_dir(workdir, kind, step), "layout"))


# What Orbax names a save's directory until the save has finished (``<step>`` + this + time).
UNFINISHED_SUFFIX = ".orbax-checkpoint-tmp"


def remove_unfinished_saves(workdir: str) -> list[str]:
    """Delete the directories of saves that never finished (a process killed while it
    wrote them; no reader takes them) under ``workdir/checkpoints/<kind>/``; returns
    their paths."""
    root = os.path.join(workdir, "checkpoints")
    found = sorted(os.path.join(root, kind, name)
                   for kind in (os.listdir(root) if os.path.isdir(root) else [])
                   if os.path.isdir(os.path.join(root, kind))
                   for name in os.listdir(os.path.join(root, kind))
                   if UNFINISHED_SUFFIX in name)
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return found


def available(workdir: str) -> dict[str, int]:
    """``{kind: step}`` of the checkpoints present in ``workdir`` (readable or not)."""
    steps = {kind: latest_step(workdir, kind) for kind in KINDS}
    return {kind: step for kind, step in steps.items() if step is not None}


def describe_available(workdir: str) -> str:
    """``"latest (step 30), best (step 20)"`` or ``"none"``: for error messages."""
    found = available(workdir)
    return ", ".join(f"{kind} (step {step})" for kind, step in found.items()) or "none"


def _existing_step(workdir: str, kind: str) -> int:
    step = latest_step(workdir, kind)
    if step is None:
        raise CheckpointError(f"{workdir}: no '{kind}' checkpoint found "
                              f"(expected {os.path.join(workdir, 'checkpoints', kind)}/<step>; "
                              f"checkpoints there: {describe_available(workdir)}); "
                              "train a model there first with ddgjax-train")
    return step


def set_aside(workdir: str, kind: str, step: int | None = None) -> str:
    """Move the (unreadable) checkpoint ``kind`` to ``checkpoints/unreadable-<kind>-<step>``,
    out of its manager, so new saves of ``kind`` start afresh. Returns the new path.
    ``step``: the checkpoint's step where the caller knows it (then no Orbax manager is
    opened, which in a multi-process run would wait for the other processes)."""
    if step is None:
        step = _existing_step(workdir, kind)
    dest = os.path.join(workdir, "checkpoints", f"unreadable-{kind}-{step}")
    suffix = 1
    while os.path.exists(dest):
        dest = os.path.join(workdir, "checkpoints", f"unreadable-{kind}-{step}-{suffix}")
        suffix += 1
    os.rename(checkpoint_dir(workdir, kind, step), dest)
    return dest


def set_aside_on_all_hosts(workdir: str, kind: str, step: int) -> str | None:
    """``set_aside`` by process 0, called by every process of a run: with several
    processes, between two barriers, so that every process has read (or failed to read)
    the checkpoint before it moves and none goes on before the move is done (a process
    reading it as it moved would fail alone and leave the others waiting). Returns the
    new path on process 0, None on the others."""
    several = jax.process_count() > 1
    if several:
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices(f"ddgjax read {workdir} {kind}")
    moved = set_aside(workdir, kind, step) if jax.process_index() == 0 else None
    if several:
        multihost_utils.sync_global_devices(f"ddgjax set aside {workdir} {kind}")
    return moved


def restore_meta(workdir: str, kind: str) -> dict:
    """Only the JSON meta of checkpoint ``kind``."""
    step = _existing_step(workdir, kind)
    try:
        with _manager(workdir, kind, create=False) as mngr:
            out = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    except Exception as e:  # noqa: BLE001 - Orbax raises many types
        raise UnreadableCheckpointError(checkpoint_dir(workdir, kind, step), e) from e
    return dict(out["meta"])
