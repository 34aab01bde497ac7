"""Train state, the data-parallel train step and the training loop.

Data parallelism follows the pmap pattern, written with ``jax.shard_map`` over
the 1-D device mesh of ``ddgjax.parallel``: each device takes a slice of the
batch, computes the gradient of its summed loss terms, and the gradients and
pair counts are summed over the named axis. Per-graph noise comes from
``fold_in(step_key, global graph index)``, so the result does not depend on
the number of devices.

Many steps run inside one ``jax.lax.scan`` (one jitted call per chunk of
epochs, ending at a checkpoint boundary); the batches come from
``ddgjax.input_pipeline`` as indices into the device copy of the training set.
The noise process (``ddgjax.processes``) supplies the loss; this module never
names one.

Size buckets (``config.data.buckets``; docs/method.md, "Size buckets"): the
training split is held on the device as one padded array per bucket, each step
trains one bucket (``input_pipeline.plan_buckets`` sets the batch per bucket and
the step's loss weight), and the same jitted chunk runs one step per call, which
compiles once per bucket shape; all steps update the one optimizer state. With
``config.data.bucket_order = "sizes"`` an epoch takes the buckets in size order, and a
chunk of epochs is one program again (``make_train_chunk_buckets``), for one run or
several seeds.

Several seeds of one config (``train_seeds``) train as one program: the state
leaves carry a leading run axis and one jitted step advances every run
(``make_train_chunk_seeds``), while each run keeps its own workdir, keys, batch
order, metrics log, checkpoints and model selection, exactly as a run of that
seed alone. Both loops are :func:`_loop`.

Faults: a workdir holding another run (other data, model or process) is refused
(``ddgjax.workdir.check_same_run``; ``restart=True`` sets it aside); an unreadable
``latest`` checkpoint falls back to ``best`` with a warning; Ctrl-C or SIGTERM
raises :class:`TrainingInterrupted`, whose text says where the run stopped, after
any checkpoint save in progress has completed.

Checkpoints are written in the background (``checkpoints.CheckpointWriter``, one per
run): a boundary's saves return once the writes are under way and the next chunk
trains meanwhile; each save first waits for the previous one of its kind, and the
loop waits for all of them before it returns or reports an interruption.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, Callable

import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from jax.sharding import Mesh, PartitionSpec as P

from ddgjax import checkpoints, input_pipeline
from ddgjax.configuration import validate_config
from ddgjax.data import node_count_distribution
from ddgjax.flat_state import FlatLayout
from ddgjax.interrupts import deferred
from ddgjax.models import init_params, model_from_config
from ddgjax.parallel import (AXIS, batch_sharded, make_mesh, put_global, replicate, replicated,
                             to_host)
from ddgjax.processes import NoiseProcess, fit_to_data, process_from_config
from ddgjax.reporting import MetricsLog, Progress
from ddgjax.validation import Validator, check_validation_config
from ddgjax.workdir import (WorkdirError, check_same_run, ensure_writable_dir, read_run_record,
                            set_aside_previous_run, write_run_record)


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss, a workdir of another run, ...)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped ``train``; the text says at which epoch and where a
    resume starts. Checkpoints are complete (a save in progress was finished)."""


@flax.struct.dataclass
class TrainState:
    """Everything a step changes. ``ema_params`` equals ``params`` when EMA is off.

    The field names are the checkpoint layout (``ddgjax.checkpoints``).
    """

    step: jax.Array
    params: Any
    ema_params: Any
    opt_state: Any


def make_optimizer(train_cfg, steps_per_epoch: int) -> optax.GradientTransformation:
    """Adam with the learning rate multiplied by ``lr_decay_per_epoch`` after each epoch.

    ``train_cfg.weight_decay > 0`` makes it AdamW (decoupled decay of every parameter by
    ``lr * weight_decay`` per step); its optimizer state differs from Adam's, so a run
    resumes only with the same choice. Configs written before the field existed read 0.
    """
    lr = optax.exponential_decay(train_cfg.lr, transition_steps=steps_per_epoch,
                                 decay_rate=train_cfg.lr_decay_per_epoch, staircase=True)
    weight_decay = float(train_cfg.get("weight_decay", 0.0))
    if weight_decay > 0:
        tx = optax.adamw(lr, b1=train_cfg.b1, b2=train_cfg.b2, weight_decay=weight_decay)
    else:
        tx = optax.adam(lr, b1=train_cfg.b1, b2=train_cfg.b2)
    if train_cfg.grad_clip > 0:
        tx = optax.chain(optax.clip_by_global_norm(train_cfg.grad_clip), tx)
    return tx


def init_state(model, tx, key: jax.Array, max_nodes: int) -> TrainState:
    """Fresh parameters (``ddgjax.models.init_params``) and optimizer state at step 0."""
    params = init_params(model, key, max_nodes)
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, ema_params=params,
                      opt_state=tx.init(params))


# ----------------------------------------------------------------------------
# The step


def graph_keys(step_key: jax.Array, first_index, count: int) -> jax.Array:
    """``[count]`` keys ``fold_in(step_key, first_index + i)``: one per global graph slot."""
    idx = first_index + jnp.arange(count, dtype=jnp.int32)
    return jax.vmap(lambda i: jax.random.fold_in(step_key, i))(idx)


def ema_update(ema_params, params, decay: float):
    """``decay * ema + (1 - decay) * params`` leaf by leaf; ``params`` itself when decay is 0."""
    if decay <= 0:
        return params
    return jax.tree_util.tree_map(lambda e, p: decay * e + (1 - decay) * p, ema_params, params)


# fold_in stream of a step's key for its dropout masks (the graphs' keys fold in indices)
DROPOUT_STREAM = 0x7FFFFFF1  # far above any graph slot index


def _train_step(model, tx, process: NoiseProcess, ema_decay: float,
                layout: FlatLayout | None = None) -> Callable:
    """``one_step(state, idx, data_adj, data_mask, base_key, weight=None) -> (state, loss)``:
    one optimizer step on this device's slice ``idx`` (``int32[B_local]``) of a batch, for
    use inside ``shard_map`` over ``AXIS`` (gradients and loss are summed over the axis).
    ``weight`` (a scalar, size buckets) multiplies the gradient; the returned loss is the
    batch's unweighted per-pair mean. With a ``layout``, ``state`` is flat
    (``FlatLayout.flatten``) and so are the gradients and the optimizer's work."""

    def one_step(state, idx, data_adj, data_mask, base_key, weight=None):
        local_b = idx.shape[0]
        first = jax.lax.axis_index(AXIS) * local_b
        adj0, mask = data_adj[idx], data_mask[idx]
        step_key = jax.random.fold_in(base_key, state.step)
        keys = graph_keys(step_key, first, local_b)

        # dropout (PPGN ``dropout > 0``): masks from this step's key and this device
        train_mode = {}
        if getattr(model, "dropout", 0.0) > 0.0:
            drop_key = jax.random.fold_in(jax.random.fold_in(step_key, DROPOUT_STREAM),
                                          jax.lax.axis_index(AXIS))
            train_mode = {"deterministic": False, "rngs": {"dropout": drop_key}}

        def summed(params):
            tree = params if layout is None else layout.params(params)
            denoise = lambda a, m, t, s, *est: model.apply(tree, a, m, t, s, *est, **train_mode)
            out = process.loss(denoise, keys, adj0, mask)
            return out.per_graph.sum(), out.num_pairs.sum()

        (local_sum, local_pairs), grads = jax.value_and_grad(summed, has_aux=True)(state.params)
        total_pairs = jnp.maximum(jax.lax.psum(local_pairs, AXIS), 1.0)
        grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, AXIS) / total_pairs, grads)
        if weight is not None:
            grads = jax.tree_util.tree_map(lambda g: g * weight.astype(g.dtype), grads)
        loss = jax.lax.psum(local_sum, AXIS) / total_pairs
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        ema = ema_update(state.ema_params, params, ema_decay)
        return TrainState(state.step + 1, params, ema, opt_state), loss

    return one_step


# XLA's schedule for the kernels of a recorded CUDA graph (command buffer) in which any two
# kernels whose inputs are ready may run side by side (its default, "LHS", overlaps only what
# its latency-hiding scheduler chose). On one H200 it took 13-22 % off the step of the paper's
# small configs (Ego-small PPGN 6 x 32 0.78 -> 0.62 ms, EDP-GNN 1.34 -> 1.05 ms) and made the
# Planar-60 PPGN 8 x 128 step 2-5 % slower with 19 % more memory (docs/benchmarks.md,
# "Rounds 47-50").
CONCURRENT_KERNELS = {"xla_gpu_command_buffer_scheduling_mode": "CONCURRENT"}


def chunk_compiler_options(concurrent_kernels: bool) -> dict | None:
    """The XLA options the training chunks compile with (``jax.jit``'s
    ``compiler_options``): ``CONCURRENT_KERNELS`` where ``config.train.concurrent_kernels``
    asks for it, else None (XLA's defaults). Read by GPU backends only."""
    return dict(CONCURRENT_KERNELS) if concurrent_kernels else None


def config_compiler_options(config) -> dict | None:
    """``chunk_compiler_options`` of a config (``config.train.concurrent_kernels``, False
    where a config written before the key lacks it)."""
    return chunk_compiler_options(bool(config.train.get("concurrent_kernels", False)))


def _sharded(per_device, mesh: Mesh, batch_spec, extra_specs=(),
             compiler_options: dict | None = None) -> Callable:
    # check_vma=False gives the classic pmap semantics: the gradient of the
    # replicated parameters is each device's local gradient, and we sum it over
    # the axis ourselves. (With check_vma=True, JAX would already insert that
    # psum in the transpose, and ours would count it n_dev times.)
    return jax.jit(jax.shard_map(per_device, mesh=mesh,
                                 in_specs=(P(), P(), P(), batch_spec, *extra_specs),
                                 out_specs=(P(), P()), check_vma=False),
                   compiler_options=compiler_options)


def _scan_steps(make_step: Callable, state, xs, flat: bool, stacked: bool = False):
    """``lax.scan(make_step(layout), state, xs)``: with ``flat`` (and a state that allows it,
    ``FlatLayout.of``) on the flat state, turned back into trees at the end, else leaf by
    leaf (``layout=None``). ``stacked``: the leaves carry a leading run axis ``[R, ...]``."""
    one = jax.tree_util.tree_map(lambda x: x[0], state) if stacked else state
    layout = FlatLayout.of(one) if flat else None
    if layout is None:
        return jax.lax.scan(make_step(None), state, xs)
    to_flat, from_flat = layout.flatten, lambda f: layout.unflatten(f, one)
    if stacked:
        to_flat, from_flat = jax.vmap(to_flat), jax.vmap(from_flat)
    flat_state, out = jax.lax.scan(make_step(layout), to_flat(state), xs)
    return from_flat(flat_state), out


def make_train_chunk(model, tx, process: NoiseProcess, mesh: Mesh, base_key: jax.Array,
                     ema_decay: float = 0.0, weighted: bool = False,
                     flat: bool = False, compiler_options: dict | None = None) -> Callable:
    """Build ``chunk(state, data_adj, data_mask, batch_idx) -> (state, losses)``, jitted.

    The loss is ``process.loss`` with ``model.apply`` as the denoiser. The compiled
    program has no host callback (the training loop shows progress between calls,
    ``progress_piece_steps``). ``flat``: the steps run on the
    state as flat vectors (``ddgjax.flat_state``: one array each for the parameters, the
    EMA and Adam's moments; the same formulas in a few kernels, equal up to float
    rounding). Only for an optimizer of ``make_optimizer`` (the training loop passes
    ``config.train.flat_update``); False (the default): leaf by leaf, for any ``tx``.
    ``compiler_options``: XLA options of the jitted chunk (``chunk_compiler_options``;
    None: XLA's defaults).

    Args of the returned function:
      state: replicated TrainState.
      data_adj: ``[G, N, N]`` the whole padded training set (replicated);
      data_mask: ``[G, N]`` (replicated). Index ``G - 1`` must be an empty graph
        (all-False mask), used to pad incomplete batches.
      batch_idx: ``int32[S, B]`` graph indices of S consecutive steps, sharded
        over the batch axis (B divisible by the number of devices).
      step_weight: only with ``weighted=True`` (size buckets): ``float32[S]``, each
        step's gradient is multiplied by its weight (``input_pipeline.plan_buckets``).
    Returns: the state after S steps and ``float32[S]`` batch losses (per-pair means,
    unweighted). The function compiles once per shape of ``data_adj`` and ``batch_idx``
    (with size buckets: once per bucket).
    """
    step_for = lambda layout: _train_step(model, tx, process, ema_decay, layout)

    if weighted:
        def per_device(state, data_adj, data_mask, batch_idx, step_weight):
            def make_step(layout):
                one_step = step_for(layout)
                return lambda st, x: one_step(st, x[0], data_adj, data_mask, base_key, x[1])
            return _scan_steps(make_step, state, (batch_idx, step_weight), flat)

        return _sharded(per_device, mesh, P(None, AXIS), (P(),), compiler_options)

    def per_device(state, data_adj, data_mask, batch_idx):
        def make_step(layout):
            one_step = step_for(layout)
            return lambda st, idx: one_step(st, idx, data_adj, data_mask, base_key)
        return _scan_steps(make_step, state, batch_idx, flat)

    return _sharded(per_device, mesh, P(None, AXIS), compiler_options=compiler_options)


def make_train_chunk_seeds(model, tx, process: NoiseProcess, mesh: Mesh, base_keys: jax.Array,
                           ema_decay: float = 0.0, flat: bool = False,
                           compiler_options: dict | None = None) -> Callable:
    """``make_train_chunk`` for several independent runs (seeds) in one program.

    Every leaf of the state carries a leading seed axis ``[R, ...]`` and run ``r`` uses
    only its own state, its own ``base_keys[r]`` and its own batches; one jitted step
    (``jax.vmap`` over the runs inside the data-parallel ``shard_map``) advances all of
    them, which keeps small models from being bound by kernel launches.

    Args of the returned function: ``states`` (replicated, leaves ``[R, ...]``),
    ``data_adj``, ``data_mask`` as for ``make_train_chunk``, and ``batch_idx``
    ``int32[S, R, B]`` (sharded over B). Returns the states after S steps and
    ``float32[S, R]`` losses. Run ``r`` equals ``make_train_chunk`` with
    ``base_keys[r]`` on ``states[r]`` and ``batch_idx[:, r]``. ``flat`` as for
    ``make_train_chunk`` (flat vectors ``[R, P]``); ``compiler_options`` too.
    """

    def per_device(states, data_adj, data_mask, batch_idx):
        def make_step(layout):
            one_step = _train_step(model, tx, process, ema_decay, layout=layout)
            step_all = jax.vmap(lambda st, idx, key: one_step(st, idx, data_adj, data_mask, key))
            return lambda st, idx: step_all(st, idx, base_keys)

        return _scan_steps(make_step, states, batch_idx, flat, stacked=True)

    return _sharded(per_device, mesh, P(None, None, AXIS), compiler_options=compiler_options)


def make_train_chunk_buckets(model, tx, process: NoiseProcess, mesh: Mesh, base_key: jax.Array,
                             steps: tuple, ema_decay: float = 0.0, stacked: bool = False,
                             flat: bool = False,
                             compiler_options: dict | None = None) -> Callable:
    """``make_train_chunk`` for size buckets taken in size order
    (``config.data.bucket_order = "sizes"``): whole epochs in one program.

    An epoch is bucket 0's ``steps[0]`` steps, then bucket 1's, and so on (each bucket a
    ``lax.scan`` over its steps at its own shape, the buckets one after the other in the
    epoch's body), so a chunk of epochs is one ``lax.scan`` and compiles once, with one
    step body per bucket however many steps it has, where the seeded interleaving of
    ``"random"`` takes one call per step. ``stacked``: several runs (seeds) in one
    program, as ``make_train_chunk_seeds`` (``base_key`` then ``[R]`` keys, state leaves
    ``[R, ...]``); all runs take the same bucket in the same step, which is what lets
    them share one program.

    Args of the returned function: ``state``; ``data_adj`` and ``data_mask``: tuples of
    the buckets' arrays (``input_pipeline.bucket_data``, replicated); ``batch_idx``: a
    tuple of ``int32[E, steps_b, B_b]`` (``[E, steps_b, R, B_b]`` when stacked) per
    bucket (``input_pipeline.sized_bucket_batches``), sharded over the last axis;
    ``bucket_weight``: ``float32[K]``, the buckets' loss weights (replicated). Returns the
    state after ``E`` epochs and the steps' losses, ``float32[E * S]`` (``[E * S, R]``)
    in the order they ran. Run ``r`` equals ``make_train_chunk(weighted=True)`` called
    step by step in the same order.
    """
    steps = tuple(int(n) for n in steps)

    def per_device(state, data_adj, data_mask, batch_idx, bucket_weight):
        def make_step(layout):
            one_step = _train_step(model, tx, process, ema_decay, layout)
            if stacked:
                step = jax.vmap(one_step, in_axes=(0, 0, None, None, 0, None))
            else:
                step = one_step

            def epoch(st, idx):
                losses = []
                for b in range(len(steps)):   # a scan over each bucket's steps
                    bucket_step = (lambda s, i, b=b: step(s, i, data_adj[b], data_mask[b],
                                                          base_key, bucket_weight[b]))
                    st, loss = jax.lax.scan(bucket_step, st, idx[b])
                    losses.append(loss)
                return st, jnp.concatenate(losses)
            return epoch

        state, losses = _scan_steps(make_step, state, batch_idx, flat, stacked)
        return state, losses.reshape((-1,) + losses.shape[2:])

    batch_spec = P(None, None, None, AXIS) if stacked else P(None, None, AXIS)
    return _sharded(per_device, mesh, batch_spec, (P(),), compiler_options)


# ----------------------------------------------------------------------------
# The loop


def restore_or_init(workdir: str, model, tx, key: jax.Array, max_nodes: int):
    """``(state, start_epoch, best_loss, open_window)``: the workdir's newest readable
    checkpoint (``latest``, else ``best``) or a fresh state; ``open_window`` holds the
    epoch losses since the last checkpoint boundary when the run stopped between two
    (its ``latest`` meta's ``open_window``; else empty).

    An unreadable ``latest`` is moved aside (``checkpoints.set_aside``) with a
    warning when ``best`` can be read. Raises TrainingError if the workdir holds a
    checkpoint of another model, or only unreadable ones.
    """
    state = init_state(model, tx, key, max_nodes)
    unreadable = []
    steps = checkpoints.available(workdir)
    for kind in steps:  # KINDS order: latest, then best, ...
        try:
            restored, meta = checkpoints.restore(workdir, kind, state)
        except checkpoints.UnreadableCheckpointError as e:
            unreadable.append((kind, e))
            continue
        except (ValueError, TypeError, KeyError, checkpoints.CheckpointError) as e:
            raise TrainingError(
                f"{workdir}: its checkpoint does not fit this config (different model, sizes "
                f"or max_nodes?); use a new --workdir, --restart, or the run's own config.json "
                f"[{type(e).__name__}: {str(e).splitlines()[0][:200]}]") from e
        for bad_kind, error in unreadable:   # every process calls it (multi-process barriers)
            moved = checkpoints.set_aside_on_all_hosts(workdir, bad_kind, steps[bad_kind])
            if moved is not None:
                print(f"warning: {error}; moved it to {moved}; resuming from the '{kind}' "
                      f"checkpoint (epoch {meta['epoch']})", file=sys.stderr)
        restored = jax.tree_util.tree_map(jnp.asarray, restored)
        window = [float(x) for x in meta.get("open_window", [])] if kind == "latest" else []
        return (restored, int(meta["epoch"]), float(meta.get("best_loss", float("inf"))),
                window)
    if unreadable:
        raise TrainingError("; ".join(str(e) for _, e in unreadable) + "; no readable checkpoint "
                            "is left to resume from: pass --restart to start over (the old run "
                            "is moved aside)")
    return state, 0, float("inf"), []


def check_finite(losses: np.ndarray, first_epoch: int, workdir: str) -> None:
    """Raise TrainingError naming the first epoch whose ``losses[e]`` row is not finite."""
    if not np.all(np.isfinite(losses)):
        bad = int(np.argmax(~np.all(np.isfinite(losses), axis=1)))
        raise TrainingError(
            f"non-finite training loss at epoch {first_epoch + bad + 1}; stopping. The last good "
            f"checkpoint in {workdir}/checkpoints is left as it was (try a lower "
            "train.lr or train.grad_clip)")


def train(config: ml_collections.ConfigDict, workdir: str, *,
          stop_after_epochs: int | None = None, verbose: bool = True, devices=None,
          restart: bool = False) -> dict:
    """Train per ``config`` in ``workdir``, resuming from its latest checkpoint.

    Writes ``config.json`` and ``dataset.json`` (``ddgjax.workdir``),
    ``metrics.jsonl`` and the ``latest`` / ``best`` checkpoints (model selection:
    the lowest mean training loss between checkpoints, as in the paper), and with
    ``config.validation.every_epochs`` the ``best_val`` checkpoint (model selection by
    samples, ``Validator``).
    ``stop_after_epochs`` ends the run early (as if killed after that many
    epochs of this invocation), for tests of resumption. ``devices`` (default:
    all) are the devices of the data-parallel mesh. A workdir holding a run with
    other data, model or process settings is refused unless ``restart``, which
    moves that run into ``workdir/replaced-<time>/`` and starts over.

    Returns a summary dict (epochs, steps, best loss, timings). Raises
    TrainingInterrupted (a KeyboardInterrupt) on Ctrl-C or SIGTERM.
    """
    return _interruptible(lambda where: _train(config, workdir, stop_after_epochs, verbose,
                                               devices, restart, where), [workdir])


def seed_workdir(workdir: str, seed: int) -> str:
    """Where :func:`train_seeds` keeps the run of ``seed``: ``workdir/seed_<seed>``."""
    return os.path.join(workdir, f"seed_{int(seed)}")


def train_seeds(config: ml_collections.ConfigDict, workdir: str, seeds, *,
                stop_after_epochs: int | None = None, verbose: bool = True, devices=None,
                restart: bool = False) -> dict:
    """Train ``config`` once per seed in ``seeds``, all runs advanced by one jitted program.

    Run ``s`` lives in ``workdir/seed_<s>`` (:func:`seed_workdir`) and is the run
    ``train(config with train.seed = s, workdir/seed_<s>)`` would make: the same
    initial parameters, noise keys and batch order (so the same result up to float
    rounding), the same ``config.json``, ``dataset.json``, ``metrics.jsonl`` and
    ``latest`` / ``best`` (/ ``best_val``) checkpoints, each saved and selected per run;
    ``ddgjax.load``, ``ddgjax-sample`` and ``ddgjax-evaluate`` work on it as on any run.
    The steps of all runs are one program (``make_train_chunk_seeds``: ``vmap`` over
    the runs), which keeps small models from being bound by kernel launches.

    Resumes every run from its own checkpoint. Runs found at different epochs (a seed
    added to a set, a kill between two runs' saves) are first brought to the furthest
    one's epoch one by one with :func:`train`, then go on together. ``restart`` sets
    aside what each run's workdir holds. Returns ``{"seeds", "runs": [summary per
    seed], ...}`` with the timings of the shared program. Raises TrainingInterrupted on
    Ctrl-C or SIGTERM (no run is left between two saves of a checkpoint boundary).
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise TrainingError("train_seeds: no seeds given")
    if len(set(seeds)) != len(seeds):
        raise TrainingError(f"train_seeds: repeated seeds in {seeds}")
    workdirs = [seed_workdir(workdir, s) for s in seeds]
    return _interruptible(lambda where: _train_seeds(config, workdir, seeds, stop_after_epochs,
                                                     verbose, devices, restart, where), workdirs)


def _interruptible(body: Callable[[dict], dict], workdirs: list[str]) -> dict:
    """``body(where)``, with Ctrl-C and SIGTERM turned into TrainingInterrupted saying
    where the run stopped (``where``: see :func:`interrupted_message`)."""
    # how far the run got, for the message (the loop has finished the checkpoint writes
    # in flight before an interrupt gets here: _loop's ExitStack closes the writers)
    where = {"epoch": None, "saved_epoch": None}
    try:
        return body(where)
    except TrainingInterrupted:
        raise  # already worded (a run trained alone to catch up)
    except KeyboardInterrupt:
        if where["epoch"] is not None:
            # the signal may have landed during or just after a save: ask the checkpoints
            where["saved_epoch"] = _resume_epoch(workdirs)
        raise TrainingInterrupted(interrupted_message(where)) from None


def _resume_epoch(workdirs: list[str]) -> int | None:
    """The epoch a resume of every run in ``workdirs`` starts from: per run, that of the
    first readable checkpoint in the order ``restore_or_init`` tries them (``latest``,
    ``best``, ...); the smallest over the runs, or None if one of them has none."""
    epochs = []
    for wd in workdirs:
        epoch = None
        for kind in checkpoints.available(wd):  # in KINDS order, as restore_or_init tries them
            try:
                epoch = int(checkpoints.restore_meta(wd, kind)["epoch"])
                break
            except checkpoints.CheckpointError:
                continue  # unreadable: a resume skips it too
        if epoch is None:
            return None
        epochs.append(epoch)
    return min(epochs)


def interrupted_message(where: dict) -> str:
    """The one line for an interrupted run; ``where`` has ``epoch`` (reached, or None
    before training began) and ``saved_epoch`` (of the newest checkpoint, or None)."""
    if where["epoch"] is None:
        return "interrupted before training began; nothing was written; run the same command again"
    saved = where["saved_epoch"]
    if saved is None:
        return (f"interrupted at epoch {where['epoch']}; resume with the same command "
                "(no checkpoint was saved yet: it starts at epoch 0)")
    if saved == where["epoch"]:
        return f"interrupted at epoch {saved}; resume with the same command"
    return (f"interrupted at epoch {where['epoch']}; resume with the same command (it continues "
            f"from the checkpoint of epoch {saved})")


def run_root_key(seed: int) -> jax.Array:
    """A run's root key: ``fold_in(root, 0)`` initialises it, ``run_base_key`` steps it."""
    return jax.random.key(int(seed))


def run_base_key(seed: int) -> jax.Array:
    """The key of a run's steps (``fold_in(base_key, step)`` per step)."""
    return jax.random.fold_in(run_root_key(seed), 1)


class _Precompile:
    """The first chunk's programs compiled in a background thread while the runs set up.

    A cold start spends seconds compiling the training chunk after the parameter
    initialisation has spent seconds compiling its own small programs (docs/benchmarks.md,
    "Round 33"). Both are independent, so the chunk compiles from abstract arguments
    (``first_chunk_specs``) while the host initialises; the loop's first call then finds
    the executable in JAX's compilation cache. ``join`` waits for it (never raises: a
    failed compile is left for the first call to repeat and report)."""

    def __init__(self, chunk_fn, arg_specs: list[tuple]):
        self.error: BaseException | None = None

        def work():
            try:
                for specs in arg_specs:
                    chunk_fn.lower(*specs).compile()
            except Exception as e:  # noqa: BLE001 - reported by the first call instead
                self.error = e

        self.thread = threading.Thread(target=work, name="ddgjax-precompile", daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()


def _spec(shape, dtype, sharding) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype), sharding=sharding)


def first_chunk_specs(setup: "_Setup", state_spec, seeds: list[int], stacked: bool,
                      end_epoch: int, pieces: bool) -> list[tuple]:
    """The abstract arguments of the calls of a fresh run's first chunk, epochs ``0 ..
    end_epoch - 1`` (``_run_epochs``), one tuple per distinct program: ``state_spec``
    (the host state's shapes and dtypes: ``jax.eval_shape`` of ``init_state``, leaves
    ``[R, ...]`` when ``stacked``) replicated, the training data, the batch indices
    sharded over the batch axis (``pieces``: as the progress bar splits the chunk), and
    with size buckets each bucket's program with its step weight."""
    mesh, spe = setup.mesh, setup.steps_per_epoch
    rep = replicated(mesh)
    state = jax.tree_util.tree_map(lambda x: _spec(x.shape, x.dtype, rep), state_spec)
    if setup.buckets is None:
        (adj_shape, adj_dtype), (mask_shape, mask_dtype) = input_pipeline.device_copy_shapes(
            setup.data)
        steps = end_epoch * spe
        size = progress_piece_steps(steps) if pieces else steps
        idx_shape = (size, len(seeds), setup.batch_size) if stacked else (size,
                                                                           setup.batch_size)
        idx = _spec(idx_shape, np.int32, batch_sharded(mesh, len(idx_shape) - 1))
        return [(state, _spec(adj_shape, adj_dtype, rep), _spec(mask_shape, mask_dtype, rep),
                 idx)]
    datas = input_pipeline.bucket_data(setup.data, setup.buckets)
    if setup.sized_buckets:
        plan = setup.buckets
        size = progress_piece_epochs(end_epoch, spe) if pieces else end_epoch
        runs = (len(seeds),) if stacked else ()
        sharding = batch_sharded(mesh, 2 + len(runs))
        idx = tuple(_spec((size, n) + runs + (bsz,), np.int32, sharding)
                    for n, bsz in zip(plan.steps, plan.batch_sizes))
        return [(state, tuple(_spec(d.adj.shape, d.adj.dtype, rep) for d in datas),
                 tuple(_spec(d.node_mask.shape, d.node_mask.dtype, rep) for d in datas), idx,
                 _spec((len(plan.sizes),), np.float32, rep))]
    specs = []
    for data, bsz in zip(datas, setup.buckets.batch_sizes):
        specs.append((state, _spec(data.adj.shape, data.adj.dtype, rep),
                      _spec(data.node_mask.shape, data.node_mask.dtype, rep),
                      _spec((1, bsz), np.int32, batch_sharded(mesh, 1)),
                      _spec((1,), np.float32, rep)))
    return specs


def _start_precompile(setup: "_Setup", chunk_fn, seeds: list[int], stacked: bool,
                      workdirs: list[str], restart: bool, pieces: bool,
                      stop_after_epochs) -> _Precompile | None:
    """``_Precompile`` of a fresh run's first chunk; None where the first chunk is not
    known before the restore (a workdir with checkpoints to resume from)."""
    config = setup.config
    if not config.train.get("precompile", True):
        return None
    if not restart and any(checkpoints.available(w) for w in workdirs):
        return None
    end_epoch = min(config.train.num_epochs, config.train.checkpoint_every_epochs)
    if stop_after_epochs is not None:
        end_epoch = min(end_epoch, stop_after_epochs)
    if end_epoch <= 0:
        return None
    one = jax.eval_shape(lambda k: init_state(setup.model, setup.tx, k, setup.max_nodes),
                         jax.random.key(0))
    state_spec = (jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct((len(seeds),) + x.shape, x.dtype), one)
        if stacked else one)
    return _Precompile(chunk_fn, first_chunk_specs(setup, state_spec, seeds, stacked,
                                                   end_epoch, pieces))


class _Setup:
    """What every run of one config shares: data, model, process, mesh, optimizer."""

    def __init__(self, config, devices, workdir: str):
        validate_config(config)
        check_validation_config(config)
        self.model = model_from_config(config)
        ensure_writable_dir(workdir)
        self.ds, self.data, self.max_nodes = input_pipeline.load_training_data(config)
        # recorded in config.json
        self.config = fit_to_data(config, self.data.adj, self.data.node_mask)
        self.process = process_from_config(self.config)
        self.dataset = input_pipeline.dataset_record(config.data.source, self.ds, self.max_nodes)
        self.num_graphs = self.data.adj.shape[0]
        self.mesh = make_mesh(devices)
        self.n_dev = self.mesh.devices.size
        self.batch_size = B = config.train.batch_size
        if B % self.n_dev:
            raise TrainingError(f"config.train.batch_size={B} must be divisible by the number of "
                                f"devices ({self.n_dev})")
        self.steps_per_epoch = input_pipeline.steps_per_epoch(self.num_graphs, B)
        # size buckets (config.data.buckets): None when off
        bounds = input_pipeline.bucket_bounds(config.data.get("buckets", ""),
                                              node_count_distribution(self.ds.train),
                                              self.max_nodes)
        self.buckets = None
        if bounds:
            self.buckets = input_pipeline.plan_buckets(self.data.num_nodes, bounds, B,
                                                       self.max_nodes, self.n_dev)
            self.steps_per_epoch = self.buckets.steps_per_epoch
        # "sizes": the buckets' steps in size order, whole epochs per jitted call
        self.bucket_order = config.data.get("bucket_order", "random")
        self.sized_buckets = self.buckets is not None and self.bucket_order == "sizes"
        self.tx = make_optimizer(config.train, self.steps_per_epoch)
        # flat train state in the chunks: safe for make_optimizer's optimizers (flat_state)
        self.flat_update = bool(config.train.get("flat_update", True))
        self.compiler_options = config_compiler_options(config)

    def device_data(self):
        """The training split on the devices (replicated): one ``GraphBatch`` with the
        empty padding graph last, or with size buckets a list of them, one per bucket."""
        if self.buckets is None:
            return replicate(input_pipeline.device_copy(self.data), self.mesh)
        return [replicate(d, self.mesh)
                for d in input_pipeline.bucket_data(self.data, self.buckets)]

    def describe_buckets(self) -> str:
        rows = self.buckets.describe()
        return ("size buckets (nodes: graphs x batch, steps, loss weight): " + "; ".join(
            f"{r['nodes']}: {r['graphs']} x {r['batch']}, {r['steps']}, {r['weight']:.3g}"
            for r in rows) + f" -> {self.steps_per_epoch} steps per epoch"
            + (", in size order" if self.sized_buckets else ""))

    def chunk_fn(self, base_key: jax.Array, stacked: bool) -> Callable:
        """The jitted chunk of this config: ``make_train_chunk`` (one run),
        ``make_train_chunk_seeds`` (``stacked``: several, ``base_key`` ``[R]``) or, with
        buckets in size order, ``make_train_chunk_buckets``."""
        common = dict(ema_decay=self.config.train.ema_decay, flat=self.flat_update,
                      compiler_options=self.compiler_options)
        if self.sized_buckets:
            return make_train_chunk_buckets(self.model, self.tx, self.process, self.mesh,
                                            base_key, self.buckets.steps, stacked=stacked,
                                            **common)
        if stacked:
            if self.buckets is not None:
                raise TrainingError(
                    "config.data.buckets: several seeds in one program (train_seeds / --seeds) "
                    "need the buckets in size order (config.data.bucket_order='sizes'); or "
                    "train each seed on its own (train), or set config.data.buckets=''")
            return make_train_chunk_seeds(self.model, self.tx, self.process, self.mesh,
                                          base_key, **common)
        return make_train_chunk(self.model, self.tx, self.process, self.mesh, base_key,
                                weighted=self.buckets is not None, **common)

    def config_for_seed(self, seed: int) -> ml_collections.ConfigDict:
        """The (data-fitted) config with ``train.seed = seed``: what a run of that seed records."""
        if int(self.config.train.seed) == int(seed):
            return self.config
        config = self.config.copy_and_resolve_references()
        config.train.seed = int(seed)
        return config


class _Run:
    """The host side of one run in its workdir: restart or resume checks, the restored
    state, the metrics log, model selection by loss (``best``) and by samples
    (``best_val``), checkpoint saves (through its ``writer``, open from :meth:`begin`
    until the loop closes it)."""

    def __init__(self, setup: _Setup, config, workdir: str, restart: bool, verbose: bool,
                 label: str = ""):
        self.setup, self.config, self.workdir, self.label = setup, config, workdir, label
        self.seed = int(config.train.seed)
        self.is_main = jax.process_index() == 0
        ensure_writable_dir(workdir)
        self.root = run_root_key(self.seed)
        if restart:
            moved = set_aside_previous_run(workdir) if self.is_main else None
            if moved:
                print(f"restart: moved the previous run in {workdir} to {moved}", file=sys.stderr)
            if jax.process_count() > 1:  # no process may restore before the move is done
                from jax.experimental import multihost_utils
                multihost_utils.sync_global_devices(f"ddgjax restart {workdir}")
        elif checkpoints.available(workdir):
            check_same_run(workdir, config, setup.dataset)
        self.restore()
        if self.validator is not None and self.is_main and verbose:
            v = self.validator
            print(f"{label}model selection by samples every {v.every} epochs against "
                  f"{v.reference_name} ({len(v.reference)} graphs), metric {v.metric!r}: "
                  "checkpoints/best_val", file=sys.stderr)
        self.log = None
        self.writer: checkpoints.CheckpointWriter | None = None
        self.pending_validation = None   # a validation whose scoring runs in the background

    def restore(self) -> None:
        """Set ``state``, ``start_epoch``, ``best_loss`` from the workdir (or fresh)."""
        s = self.setup
        self.state, self.start_epoch, self.best_loss, self.window = restore_or_init(
            self.workdir, s.model, s.tx, jax.random.fold_in(self.root, 0), s.max_nodes)
        # (after the restore: it reads the best validation score so far from best_val)
        self.validator = Validator.from_config(self.config, s.ds, s.model, s.process,
                                               s.max_nodes, self.workdir)

    @property
    def base_key(self) -> jax.Array:
        """The key of the run's steps (``fold_in(base_key, step)`` per step)."""
        return run_base_key(self.seed)

    def begin(self) -> checkpoints.CheckpointWriter:
        """Write the run record, open the metrics log and the checkpoint writer (returned;
        the caller closes it); call once the start went well."""
        if self.start_epoch and self.is_main:  # printed even when quiet: never resume silently
            print(f"{self.label}resuming from {self.workdir} at epoch {self.start_epoch} "
                  f"(step {int(to_host(self.state.step))})", file=sys.stderr)
        # Written only now that the data, model and any checkpoint have loaded, so a
        # failed start never replaces the record of a good run.
        if self.is_main:
            write_run_record(self.workdir, self.config, self.setup.dataset)
        self.log = MetricsLog(self.workdir, enabled=self.is_main)
        # epochs after the checkpoint are trained (and logged) again
        self.log.truncate_after(self.start_epoch)
        self.writer = checkpoints.CheckpointWriter(self.workdir)
        return self.writer

    def log_chunk(self, losses: np.ndarray, epoch: int, dt: float,
                  weights: np.ndarray | None = None) -> float:
        """Log the epochs of a chunk that ended at ``epoch`` (``losses`` ``[n_ep, steps]``);
        returns the last epoch's mean loss. With size buckets, ``weights`` (``[n_ep,
        steps]``, the steps' loss weights) make the epoch loss the weighted mean, i.e.
        the per-pair mean over the epoch's graphs."""
        n_ep, spe = losses.shape
        if weights is None:
            epoch_losses = losses.mean(axis=1)
        else:
            epoch_losses = (losses * weights).sum(axis=1) / np.maximum(weights.sum(axis=1),
                                                                         1e-30)
        self.window.extend(epoch_losses.tolist())
        every = self.config.train.log_every_epochs
        for k, e_loss in enumerate(epoch_losses):
            e = epoch - n_ep + k + 1
            if e % every == 0 or e == epoch:
                self.log.write({"epoch": e, "step": e * spe, "loss": float(e_loss),
                                "epochs_per_s": n_ep / dt})
        return float(epoch_losses[-1])

    def selection_meta(self, epoch: int, step: int, boundary: bool = True) -> dict:
        """The checkpoint meta at ``epoch``; model selection by the mean training loss over
        the epochs since the last checkpoint boundary. At a boundary (a multiple of
        ``checkpoint_every_epochs``, or the last epoch) it empties the window; at a stop
        between two (``boundary=False``) it keeps the window and records it as
        ``open_window``, so that the resumed run's next boundary selects over the same
        epochs as a run that did not stop, and the stop is no candidate for ``best``."""
        sel = float(np.mean(self.window))
        meta = {"epoch": epoch, "step": step, "loss": sel}
        if boundary:
            self.window = []
            return {**meta, "best_loss": min(self.best_loss, sel)}
        return {**meta, "best_loss": self.best_loss, "open_window": list(self.window)}

    def validate(self, state, epoch: int, step: int, meta: dict, bar: Progress) -> None:
        """Model selection by samples at a checkpoint boundary (``state``: the host train
        state). First the earlier validation's result is applied where it is due (see
        ``ddgjax.validation``: in a one-process run as soon as its scoring is done, in a
        multi-process run at the next validation); then, where a validation is due at
        ``epoch``, its samples are drawn and their scoring starts in the background."""
        if self.validator is None:
            return
        due = epoch % self.validator.every == 0
        pending = self.pending_validation
        if pending is not None and (due or (jax.process_count() == 1 and pending.done())):
            self.finish_validation(bar)
        if due:
            self.pending_validation = self.validator.start(state, epoch, step, meta)

    def finish_validation(self, bar: Progress) -> None:
        """Apply the pending validation, if any (waits for its scoring): ``best_val`` when
        it is the best so far, its record in the metrics log, a note on the bar."""
        pending, self.pending_validation = self.pending_validation, None
        if pending is None:
            return
        scores = self.validator.finish(pending, save=self.writer.save)
        self.log.write({"epoch": pending.epoch, "step": pending.step, "validation": scores})
        bar.note(f"{self.label}epoch {pending.epoch}: validation " + ", ".join(
            f"{k} {v:.4g}" for k, v in scores.items() if isinstance(v, float)))

    def save(self, state, step: int, meta: dict) -> None:
        """``best`` when the loss improved (at a boundary: ``selection_meta``), then
        ``latest``; both are written in the background (``writer``)."""
        if "open_window" not in meta and meta["loss"] < self.best_loss:
            self.best_loss = meta["loss"]
            self.writer.save("best", step, state, meta)
        self.writer.save("latest", step, state, meta)

    def end(self, summary: dict) -> dict:
        summary = {**summary, "best_loss": self.best_loss}
        if self.is_main:
            self.log.write({"event": "end", **summary})
        return summary


def _train(config, workdir, stop_after_epochs, verbose, devices, restart, where) -> dict:
    """The body of :func:`train`; updates ``where`` as epochs pass."""
    setup = _Setup(config, devices, workdir)
    seed = int(setup.config.train.seed)
    chunk_fn = setup.chunk_fn(run_base_key(seed), stacked=False)
    bar_enabled = verbose and jax.process_index() == 0
    precompile = _start_precompile(setup, chunk_fn, [seed], False, [workdir], restart,
                                   bar_enabled, stop_after_epochs)
    run = _Run(setup, setup.config, workdir, restart, verbose)
    where["epoch"] = run.start_epoch
    bar = Progress(setup.config.train.num_epochs, run.start_epoch, desc="epochs",
                   enabled=bar_enabled)
    if setup.buckets is not None and verbose and run.is_main:
        print(setup.describe_buckets(), file=sys.stderr)
    state = replicate(run.state, setup.mesh)
    return _loop(setup, [run], chunk_fn, state, False, bar, stop_after_epochs, where,
                 precompile)[0]


def _train_seeds(config, workdir, seeds, stop_after_epochs, verbose, devices, restart,
                 where) -> dict:
    """The body of :func:`train_seeds`."""
    setup = _Setup(config, devices, workdir)
    chunk_fn = setup.chunk_fn(jnp.stack([run_base_key(s) for s in seeds]), stacked=True)
    if not restart:
        for s in seeds:
            _check_seed_record(seed_workdir(workdir, s), s)
    bar_enabled = verbose and jax.process_index() == 0
    workdirs = [seed_workdir(workdir, s) for s in seeds]
    precompile = _start_precompile(setup, chunk_fn, list(seeds), True, workdirs, restart,
                                   bar_enabled, stop_after_epochs)
    width = max(len(str(s)) for s in seeds)
    runs = [_Run(setup, setup.config_for_seed(s), seed_workdir(workdir, s), restart, verbose,
                 label=f"seed {s:>{width}}: ") for s in seeds]
    target = max(r.start_epoch for r in runs)
    for run in runs:
        if run.start_epoch < target:
            # Bring it to the others' epoch alone: its own steps, so the same result.
            print(f"{run.label}at epoch {run.start_epoch}, the furthest run at {target}: "
                  f"training it alone to epoch {target} first", file=sys.stderr)
            train(run.config, run.workdir, stop_after_epochs=target - run.start_epoch,
                  verbose=verbose, devices=devices)
            run.restore()
            if run.start_epoch != target:
                raise TrainingError(
                    f"{run.workdir}: at epoch {run.start_epoch} after catching up, not at the "
                    f"other runs' epoch {target} (did config.train.num_epochs shrink below "
                    "it?); train the runs to the same epoch, or start over with --restart")
    where["epoch"] = target
    bar = Progress(setup.config.train.num_epochs, target, desc=f"epochs ({len(seeds)} seeds)",
                   enabled=bar_enabled)
    stacked = jax.tree_util.tree_map(lambda *x: np.stack([np.asarray(a) for a in x]),
                                     *[to_host(r.state) for r in runs])
    state = replicate(stacked, setup.mesh)
    summaries = _loop(setup, runs, chunk_fn, state, True, bar, stop_after_epochs, where,
                      precompile)
    return {"seeds": seeds, "workdirs": [r.workdir for r in runs], "runs": summaries,
            **{k: v for k, v in summaries[0].items() if k != "best_loss"}}


def _check_seed_record(workdir: str, seed: int) -> None:
    """Raise TrainingError if ``workdir`` records a run of a seed other than ``seed``."""
    try:
        recorded, _ = read_run_record(workdir)
    except WorkdirError:
        return
    other = recorded.get("train", {}).get("seed")
    if other is not None and int(other) != int(seed):
        raise TrainingError(f"{workdir} holds a run of train.seed={other}, not {seed}; "
                            "move it elsewhere, or pass --restart to start over there")


# With a progress bar, a chunk of S steps runs as equal pieces (one compile) of at least
# PROGRESS_MIN_STEPS steps, about PROGRESS_PIECES of them, and the bar moves as each
# finishes. A host callback in every step instead cost the Ego-small step 24 % on an
# H200 (docs/benchmarks.md, round 17).
PROGRESS_PIECES = 10
PROGRESS_MIN_STEPS = 8
# The loop queues up to this many jitted calls ahead of reading their losses: all the
# pieces of a chunk with a progress bar, and as many steps of a chunk with size buckets
# (one call per step). Each queued call holds its output state until it runs.
CALLS_IN_FLIGHT = 16


def progress_piece_steps(total: int) -> int:
    """The steps of each piece of a ``total``-step chunk: the smallest divisor of ``total``
    that is at least ``max(PROGRESS_MIN_STEPS, total / PROGRESS_PIECES)`` (``total`` when
    there is none below it)."""
    low = max(PROGRESS_MIN_STEPS, -(-total // PROGRESS_PIECES))
    return next((d for d in range(low, total) if total % d == 0), total)


def progress_piece_epochs(epochs: int, steps_per_epoch: int) -> int:
    """``progress_piece_steps`` in whole epochs, for chunks that run whole epochs
    (buckets in size order): the smallest divisor of ``epochs`` whose steps are at least
    ``PROGRESS_MIN_STEPS`` and whose epochs at least ``epochs / PROGRESS_PIECES``."""
    low = max(-(-PROGRESS_MIN_STEPS // steps_per_epoch), -(-epochs // PROGRESS_PIECES))
    return next((d for d in range(low, epochs) if epochs % d == 0), epochs)


def _progress_report(bar: Progress, setup: _Setup, where: dict):
    """``report(steps_done, losses)`` for the bar between jitted calls (None without a bar):
    reading ``losses`` waits for the call that made them, while the next one runs."""
    if not bar.enabled:
        return None

    def report(step, losses):
        loss = float(np.mean(np.asarray(to_host(losses))[-1]))
        where["epoch"] = int(step) // setup.steps_per_epoch
        bar.update(int(step) / setup.steps_per_epoch, loss=loss)

    return report


def _loop(setup: _Setup, runs: list[_Run], chunk_fn, state, stacked: bool, bar: Progress,
          stop_after_epochs, where, precompile: _Precompile | None = None) -> list[dict]:
    """The training loop of one run (``stacked=False``: ``make_train_chunk``) or of several
    at the same epoch (``stacked``: ``make_train_chunk_seeds``, state leaves ``[R, ...]``).
    Returns each run's summary once all its checkpoints are written; on any exception
    the writes in flight are finished (or fail, keeping the previous checkpoints) before
    it propagates."""
    with contextlib.ExitStack() as writers:
        for run in runs:
            writers.enter_context(run.begin())
        return _epochs(setup, runs, chunk_fn, state, stacked, bar, stop_after_epochs, where,
                       precompile)


def _epochs(setup: _Setup, runs: list[_Run], chunk_fn, state, stacked: bool, bar: Progress,
            stop_after_epochs, where, precompile: _Precompile | None = None) -> list[dict]:
    """The body of :func:`_loop`, with the runs' checkpoint writers open.

    One jitted chunk runs up to a checkpoint boundary. The host work of a chunk (reading
    its losses, the divergence check, logging, validation, the checkpoint saves) runs
    once the next chunk's calls are queued (``_run_epochs``: up to ``CALLS_IN_FLIGHT`` of
    them), so the device trains on while the host works. A chunk's state is an input of
    the next chunk, not donated, so it stays readable. A Ctrl-C or SIGTERM never
    drops a boundary: a chunk's host work, once begun, runs to its end before the
    interrupt acts (``deferred``), and a chunk whose host work had not begun when the
    interrupt came gets it then (its boundary's validation and checkpoint), before
    the interrupt propagates."""
    config, spe = setup.config, setup.steps_per_epoch
    start_epoch = runs[0].start_epoch
    num_epochs = config.train.num_epochs
    end_epoch = num_epochs if stop_after_epochs is None else min(num_epochs,
                                                                 start_epoch + stop_after_epochs)
    ckpt_every = config.train.checkpoint_every_epochs
    device_data = setup.device_data()
    report = _progress_report(bar, setup, where)
    epoch = start_epoch
    t_start = time.time()
    # first_call: until the first chunk's losses were read; chunks: the host blocked in
    # jitted calls or waiting for their losses; val/ckpt: at boundaries
    # host: in finish() (its wait for the losses counted again under chunks)
    times = {"first_call": None, "chunks": 0.0, "val": 0.0, "ckpt": 0.0, "host": 0.0,
             "ready": t_start}

    begun = set()   # the first epochs of the chunks whose host work has begun

    def finish(chunk):
        """The host work of a queued chunk ``(state, losses, weights, first, last)``; an
        interrupt meanwhile is held until it is done."""
        t0 = time.time()
        try:
            with deferred():
                begun.add(chunk[3])
                _finish(*chunk, t0)
        finally:
            times["host"] += time.time() - t0

    def _finish(chunk_state, chunk_losses, weights, first, last, t0):
        losses = np.concatenate(to_host(chunk_losses)).reshape(last - first, spe, len(runs))
        now = time.time()
        times["chunks"] += now - t0
        dt, times["ready"] = now - times["ready"], now   # from the previous chunk's end
        if times["first_call"] is None:
            times["first_call"] = dt
        for r, run in enumerate(runs):  # nothing of this chunk is kept if any run diverged
            check_finite(losses[..., r], first, run.workdir)
        where["epoch"] = last
        latest = [run.log_chunk(losses[..., r], last, dt, weights) for r, run in enumerate(runs)]
        bar.update(last, force=last == end_epoch, loss=float(np.mean(latest)),
                   steps_per_s=(last - first) * spe / dt)
        if last % ckpt_every == 0 or last == end_epoch:
            host = to_host(chunk_state)
            states = [jax.tree_util.tree_map(lambda x, r=r: x[r], host) if stacked else host
                      for r in range(len(runs))]
            step = int(states[0].step)
            boundary = last % ckpt_every == 0 or last == num_epochs
            metas = [run.selection_meta(last, step, boundary) for run in runs]
            t1 = time.time()
            for run, st, meta in zip(runs, states, metas):
                run.validate(st, last, step, meta, bar)
            t2 = time.time()
            for run, st, meta in zip(runs, states, metas):  # under finish's deferred()
                run.save(st, step, meta)
            times["val"] += t2 - t1
            times["ckpt"] += time.time() - t2

    def finish_validations():
        """The validations still scoring: applied before the run ends or stops."""
        t0 = time.time()
        with deferred():
            for run in runs:
                run.finish_validation(bar)
        times["val"] += time.time() - t0

    previous = pending = None
    try:
        while epoch < end_epoch:
            # One jitted call runs up to `ckpt_every` epochs (ends at a checkpoint boundary).
            next_stop = min(end_epoch, (epoch // ckpt_every + 1) * ckpt_every)
            if epoch == start_epoch and bar.enabled:
                shapes = ("" if setup.buckets is None or setup.sized_buckets
                          else f", one per bucket: {len(device_data)}")
                print(f"compiling the training step ({setup.n_dev} device(s){shapes})...",
                      file=sys.stderr, flush=True)
            if epoch == start_epoch and precompile is not None:
                precompile.join()        # the first call finds its executable compiled
            previous, pending = pending, None
            t0, host0 = time.time(), times["host"]
            state, losses, weights = _run_epochs(
                setup, runs, chunk_fn, state, device_data, epoch, next_stop, stacked, report,
                None if previous is None else lambda: finish(previous))
            times["chunks"] += time.time() - t0 - (times["host"] - host0)
            pending = (state, losses, weights, epoch, next_stop)
            epoch = next_stop
        if pending is not None:
            finish(pending)
        finish_validations()
    except KeyboardInterrupt:
        # the queued chunks whose host work had not begun: their boundaries are kept
        for chunk in (previous, pending):
            if chunk is not None and chunk[3] not in begun:
                if bar.enabled:
                    print(f"\nfinishing epoch {chunk[4]}'s checkpoint before stopping...",
                          file=sys.stderr, flush=True)
                finish(chunk)
        finish_validations()
        raise
    t3 = time.time()
    for run in runs:  # the last boundary's writes: final before the run reports its end
        run.writer.wait()
    times["ckpt"] += time.time() - t3
    bar.close()
    steps = int(np.asarray(to_host(state.step)).reshape(-1)[0])
    # seconds: the whole loop; first_call_seconds: until the first chunk's losses were
    # read (it compiles); chunk_seconds: the host blocked in jitted calls or on their
    # results; validation_seconds: at boundaries; checkpoint_seconds: blocked on saves
    # (at boundaries, and the wait for the last ones). Boundary work overlaps the next
    # chunk on the device.
    summary = {"epochs": epoch, "steps": steps, "seconds": time.time() - t_start,
               "first_call_seconds": times["first_call"], "chunk_seconds": times["chunks"],
               "checkpoint_seconds": times["ckpt"], "validation_seconds": times["val"],
               "devices": setup.n_dev, "steps_per_epoch": spe,
               "precompiled": precompile is not None and precompile.error is None}
    if setup.buckets is not None:
        summary["buckets"] = setup.buckets.describe()
    return [run.end(summary) for run in runs]


def _run_epochs(setup: _Setup, runs: list[_Run], chunk_fn, state, device_data, epoch: int,
                end_epoch: int, stacked: bool, report: Callable | None = None,
                after_queued: Callable | None = None):
    """Queue epochs ``epoch .. end_epoch - 1``: ``(state, losses, step weights [n_ep, spe]
    or None)``, ``losses`` the calls' device arrays (``np.concatenate`` of them on the
    host: ``[n_ep * spe, R]``, or ``[n_ep * spe]`` for one run).

    Without buckets, one call of ``chunk_fn`` (a scan over all the steps), or with a
    ``report`` (``_progress_report``) equal pieces of ``progress_piece_steps`` steps. With
    size buckets, one call per step (batch ``[1, B_b]`` of bucket ``b``: one compiled
    program per bucket shape), in the epoch's interleaved bucket order; every call updates
    the same state; with buckets in size order (``setup.sized_buckets``), one call per
    chunk (or per piece of whole epochs, ``progress_piece_epochs``). Up to
    ``CALLS_IN_FLIGHT`` calls are queued ahead of the host: ``after_queued()`` (the
    loop's host work for the previous chunk) runs once that many (or all) are queued,
    and ``report(steps_done, losses)`` follows each call in order, reading its losses
    (which waits for it) only once the calls after it are queued.
    """
    mesh, n_ep, spe = setup.mesh, end_epoch - epoch, setup.steps_per_epoch
    losses, done = [], []   # done[i]: the chunk's steps after call i
    settled = 0             # calls reported (or waited for) so far

    def settle(upto):
        nonlocal settled
        while settled < upto:
            if report is not None:
                report(epoch * spe + done[settled], losses[settled])
            else:
                jax.block_until_ready(losses[settled])
            settled += 1

    def call(num_calls, steps, *args):
        nonlocal state
        state, loss = chunk_fn(state, *args)
        losses.append(loss)
        done.append((done[-1] if done else 0) + steps)
        if len(losses) == min(CALLS_IN_FLIGHT, num_calls) and after_queued is not None:
            after_queued()  # exactly once: every chunk makes at least one call
        settle(len(losses) - CALLS_IN_FLIGHT)

    if setup.buckets is None:
        # Each run's batches: those of a single run of its seed, [S, R, B] (or [S, B]).
        idx = np.stack([input_pipeline.batches_for_epochs(setup.num_graphs, setup.batch_size,
                                                          run.seed, epoch, end_epoch)
                        for run in runs], axis=1)
        if not stacked:
            idx = idx[:, 0]
        sharding = batch_sharded(mesh, idx.ndim - 1)
        size = progress_piece_steps(len(idx)) if report is not None else len(idx)
        for lo in range(0, len(idx), size):
            call(len(idx) // size, size, device_data.adj, device_data.node_mask,
                 put_global(idx[lo:lo + size], sharding))
        weights = None
    elif setup.sized_buckets:
        # Each run's batches: those of a single run of its seed, per bucket
        # [E, steps_b, R, B_b] (or [E, steps_b, B_b]); pieces of whole epochs.
        plan = setup.buckets
        per_run = [input_pipeline.sized_bucket_batches(plan, run.seed, epoch, end_epoch)
                   for run in runs]
        idx = ([np.stack([p[b] for p in per_run], axis=2) for b in range(len(plan.sizes))]
               if stacked else per_run[0])
        sharding = batch_sharded(mesh, idx[0].ndim - 1)
        adjs = tuple(d.adj for d in device_data)
        masks = tuple(d.node_mask for d in device_data)
        bucket_weight = replicate(np.asarray(plan.weights, np.float32), mesh)
        size = progress_piece_epochs(n_ep, spe) if report is not None else n_ep
        for lo in range(0, n_ep, size):
            call(n_ep // size, size * spe, adjs, masks,
                 tuple(put_global(i[lo:lo + size], sharding) for i in idx), bucket_weight)
        weights = np.tile(input_pipeline.sized_step_weights(plan), n_ep).reshape(n_ep, spe)
    else:
        assert not stacked and len(runs) == 1
        order, batches, weights = input_pipeline.bucket_batches_for_epochs(
            setup.buckets, runs[0].seed, epoch, end_epoch)
        sharding = batch_sharded(mesh, 1)
        for b, idx, w in zip(order, batches, weights):
            data = device_data[b]
            call(len(order), 1, data.adj, data.node_mask, put_global(idx[None], sharding),
                 replicate(w[None], mesh))
        weights = weights.reshape(n_ep, spe)
    if report is not None:
        settle(len(losses))
    return state, losses, weights
