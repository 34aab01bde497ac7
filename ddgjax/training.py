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

Faults: a workdir holding another run (other data, model or process) is refused
(``ddgjax.workdir.check_same_run``; ``restart=True`` sets it aside); an unreadable
``latest`` checkpoint falls back to ``best`` with a warning; Ctrl-C or SIGTERM
raises :class:`TrainingInterrupted`, whose text says where the run stopped, after
any checkpoint save in progress has completed.
"""
from __future__ import annotations

import sys
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
from ddgjax.models import init_params, model_from_config
from ddgjax.parallel import AXIS, batch_sharded, make_mesh, put_global, replicate, to_host
from ddgjax.processes import NoiseProcess, fit_to_data, process_from_config
from ddgjax.reporting import MetricsLog, Progress
from ddgjax.validation import Validator, check_validation_config
from ddgjax.workdir import (check_same_run, ensure_writable_dir, set_aside_previous_run,
                            write_run_record)


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
    """Adam with the learning rate multiplied by ``lr_decay_per_epoch`` after each epoch."""
    lr = optax.exponential_decay(train_cfg.lr, transition_steps=steps_per_epoch,
                                 decay_rate=train_cfg.lr_decay_per_epoch, staircase=True)
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


def _train_step(model, tx, process: NoiseProcess, ema_decay: float,
                on_step: Callable[[Any, Any], None] | None = None) -> Callable:
    """``one_step(state, idx, base_key) -> (state, loss)``: one optimizer step on this
    device's slice ``idx`` (``int32[B_local]``) of a batch, for use inside ``shard_map``
    over ``AXIS`` (gradients and loss are summed over the axis)."""

    def one_step(state, idx, data_adj, data_mask, base_key):
        local_b = idx.shape[0]
        first = jax.lax.axis_index(AXIS) * local_b
        adj0, mask = data_adj[idx], data_mask[idx]
        step_key = jax.random.fold_in(base_key, state.step)
        keys = graph_keys(step_key, first, local_b)

        def summed(params):
            denoise = lambda a, m, t, s: model.apply(params, a, m, t, s)
            out = process.loss(denoise, keys, adj0, mask)
            return out.per_graph.sum(), out.num_pairs.sum()

        (local_sum, local_pairs), grads = jax.value_and_grad(summed, has_aux=True)(state.params)
        total_pairs = jnp.maximum(jax.lax.psum(local_pairs, AXIS), 1.0)
        grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, AXIS) / total_pairs, grads)
        loss = jax.lax.psum(local_sum, AXIS) / total_pairs
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        ema = ema_update(state.ema_params, params, ema_decay)
        if on_step is not None:
            jax.lax.cond(jax.lax.axis_index(AXIS) == 0,
                         lambda: jax.debug.callback(on_step, state.step + 1, loss),
                         lambda: None)
        return TrainState(state.step + 1, params, ema, opt_state), loss

    return one_step


def _sharded(per_device, mesh: Mesh, batch_spec) -> Callable:
    # check_vma=False gives the classic pmap semantics: the gradient of the
    # replicated parameters is each device's local gradient, and we sum it over
    # the axis ourselves. (With check_vma=True, JAX would already insert that
    # psum in the transpose, and ours would count it n_dev times.)
    return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(), P(), batch_spec),
                                 out_specs=(P(), P()), check_vma=False))


def make_train_chunk(model, tx, process: NoiseProcess, mesh: Mesh, base_key: jax.Array,
                     ema_decay: float = 0.0,
                     on_step: Callable[[Any, Any], None] | None = None) -> Callable:
    """Build ``chunk(state, data_adj, data_mask, batch_idx) -> (state, losses)``, jitted.

    The loss is ``process.loss`` with ``model.apply`` as the denoiser. ``on_step``
    (optional) is a host function ``(step, loss)`` called after every step from the
    first device (``jax.debug.callback``), e.g. for a progress bar during a long
    chunk; with None the compiled program has no callback.

    Args of the returned function:
      state: replicated TrainState.
      data_adj: ``[G, N, N]`` the whole padded training set (replicated);
      data_mask: ``[G, N]`` (replicated). Index ``G - 1`` must be an empty graph
        (all-False mask), used to pad incomplete batches.
      batch_idx: ``int32[S, B]`` graph indices of S consecutive steps, sharded
        over the batch axis (B divisible by the number of devices).
    Returns: the state after S steps and ``float32[S]`` batch losses (per-pair means).
    """
    one_step = _train_step(model, tx, process, ema_decay, on_step)

    def per_device(state, data_adj, data_mask, batch_idx):
        return jax.lax.scan(lambda st, idx: one_step(st, idx, data_adj, data_mask, base_key),
                            state, batch_idx)

    return _sharded(per_device, mesh, P(None, AXIS))


def make_train_chunk_seeds(model, tx, process: NoiseProcess, mesh: Mesh, base_keys: jax.Array,
                           ema_decay: float = 0.0) -> Callable:
    """``make_train_chunk`` for several independent runs (seeds) in one program.

    Every leaf of the state carries a leading seed axis ``[R, ...]`` and run ``r`` uses
    only its own state, its own ``base_keys[r]`` and its own batches; one jitted step
    (``jax.vmap`` over the runs inside the data-parallel ``shard_map``) advances all of
    them, which keeps small models from being bound by kernel launches.

    Args of the returned function: ``states`` (replicated, leaves ``[R, ...]``),
    ``data_adj``, ``data_mask`` as for ``make_train_chunk``, and ``batch_idx``
    ``int32[S, R, B]`` (sharded over B). Returns the states after S steps and
    ``float32[S, R]`` losses. Run ``r`` equals ``make_train_chunk`` with
    ``base_keys[r]`` on ``states[r]`` and ``batch_idx[:, r]``.
    """
    one_step = _train_step(model, tx, process, ema_decay)

    def per_device(states, data_adj, data_mask, batch_idx):
        step_all = jax.vmap(lambda st, idx, key: one_step(st, idx, data_adj, data_mask, key))
        return jax.lax.scan(lambda st, idx: step_all(st, idx, base_keys), states, batch_idx)

    return _sharded(per_device, mesh, P(None, None, AXIS))


# ----------------------------------------------------------------------------
# The loop


def restore_or_init(workdir: str, model, tx, key: jax.Array, max_nodes: int):
    """``(state, start_epoch, best_loss)``: the workdir's newest readable checkpoint
    (``latest``, else ``best``) or a fresh state.

    An unreadable ``latest`` is moved aside (``checkpoints.set_aside``) with a
    warning when ``best`` can be read. Raises TrainingError if the workdir holds a
    checkpoint of another model, or only unreadable ones.
    """
    state = init_state(model, tx, key, max_nodes)
    unreadable = []
    for kind in checkpoints.KINDS:  # newest first: latest, then best
        if checkpoints.latest_step(workdir, kind) is None:
            continue
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
        for bad_kind, error in unreadable:
            if jax.process_index() == 0:
                moved = checkpoints.set_aside(workdir, bad_kind)
                print(f"warning: {error}; moved it to {moved}; resuming from the '{kind}' "
                      f"checkpoint (epoch {meta['epoch']})", file=sys.stderr)
        restored = jax.tree_util.tree_map(jnp.asarray, restored)
        return restored, int(meta["epoch"]), float(meta.get("best_loss", float("inf")))
    if unreadable:
        raise TrainingError("; ".join(str(e) for _, e in unreadable) + "; no readable checkpoint "
                            "is left to resume from: pass --restart to start over (the old run "
                            "is moved aside)")
    return state, 0, float("inf")


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
    where = {"epoch": None, "saved_epoch": None}  # how far the run got, for the message
    try:
        return _train(config, workdir, stop_after_epochs, verbose, devices, restart, where)
    except KeyboardInterrupt:
        if where["epoch"] is not None and checkpoints.latest_step(workdir, "latest") is not None:
            # the signal may have landed just after a save completed: ask the checkpoint
            where["saved_epoch"] = int(checkpoints.restore_meta(workdir, "latest")["epoch"])
        raise TrainingInterrupted(interrupted_message(where)) from None


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


def _train(config, workdir, stop_after_epochs, verbose, devices, restart, where) -> dict:
    """The body of :func:`train`; updates ``where`` as epochs pass and checkpoints are saved."""
    validate_config(config)
    check_validation_config(config)
    model = model_from_config(config)
    is_main = jax.process_index() == 0
    ensure_writable_dir(workdir)
    ds, data, max_nodes = input_pipeline.load_training_data(config)
    config = fit_to_data(config, data.adj, data.node_mask)  # recorded in config.json
    process = process_from_config(config)
    dataset = input_pipeline.dataset_record(config.data.source, ds, max_nodes)
    num_graphs = data.adj.shape[0]

    mesh = make_mesh(devices)
    n_dev = mesh.devices.size
    B = config.train.batch_size
    if B % n_dev:
        raise TrainingError(f"config.train.batch_size={B} must be divisible by the number of "
                            f"devices ({n_dev})")
    steps_per_epoch = input_pipeline.steps_per_epoch(num_graphs, B)
    tx = make_optimizer(config.train, steps_per_epoch)
    root = jax.random.key(config.train.seed)
    if restart:
        moved = set_aside_previous_run(workdir) if is_main else None
        if moved:
            print(f"restart: moved the previous run in {workdir} to {moved}", file=sys.stderr)
    elif checkpoints.available(workdir):
        check_same_run(workdir, config, dataset)
    state, start_epoch, best_loss = restore_or_init(workdir, model, tx, jax.random.fold_in(root, 0),
                                                    max_nodes)
    validator = Validator.from_config(config, ds, model, process, max_nodes, workdir)
    if validator is not None and is_main and verbose:
        print(f"model selection by samples every {validator.every} epochs against "
              f"{validator.reference_name} ({len(validator.reference)} graphs), metric "
              f"{validator.metric!r}: checkpoints/best_val", file=sys.stderr)
    if start_epoch and is_main:  # printed even when quiet: a resume should never be silent
        print(f"resuming from {workdir} at epoch {start_epoch} (step {int(state.step)})",
              file=sys.stderr)
    where.update(epoch=start_epoch, saved_epoch=start_epoch if start_epoch else None)

    device_data = replicate(input_pipeline.device_copy(data), mesh)
    state = replicate(state, mesh)
    num_epochs = config.train.num_epochs
    bar = Progress(num_epochs, start_epoch, desc="epochs", enabled=verbose and is_main)

    def on_step(step, loss):  # host side, every step of a chunk (device 0 only)
        where["epoch"] = int(step) // steps_per_epoch
        bar.update(int(step) / steps_per_epoch, loss=float(loss))

    chunk_fn = make_train_chunk(model, tx, process, mesh, jax.random.fold_in(root, 1),
                                config.train.ema_decay, on_step=on_step if bar.enabled else None)
    # Written only now that the data, model and any checkpoint have loaded, so a
    # failed start never replaces the record of a good run.
    if is_main:
        write_run_record(workdir, config, dataset)

    end_epoch = num_epochs if stop_after_epochs is None else min(num_epochs,
                                                                 start_epoch + stop_after_epochs)
    ckpt_every = config.train.checkpoint_every_epochs
    log_every = config.train.log_every_epochs
    log = MetricsLog(workdir, enabled=is_main)
    log.truncate_after(start_epoch)  # epochs after the checkpoint are trained (and logged) again
    epoch = start_epoch
    window: list[float] = []
    t_start = time.time()
    compile_s = None
    while epoch < end_epoch:
        # One jitted call runs up to `ckpt_every` epochs (ends at a checkpoint boundary).
        next_stop = min(end_epoch, (epoch // ckpt_every + 1) * ckpt_every)
        n_ep = next_stop - epoch
        idx = input_pipeline.batches_for_epochs(num_graphs, B, config.train.seed, epoch, next_stop)
        if compile_s is None and bar.enabled:
            print(f"compiling the training step ({n_dev} device(s))...", file=sys.stderr, flush=True)
        t0 = time.time()
        state, losses = chunk_fn(state, device_data.adj, device_data.node_mask,
                                 put_global(idx, batch_sharded(mesh, 1)))
        losses = to_host(losses).reshape(n_ep, steps_per_epoch)
        dt = time.time() - t0
        compile_s = dt if compile_s is None else compile_s
        check_finite(losses, epoch, workdir)
        epoch_losses = losses.mean(axis=1)
        window.extend(epoch_losses.tolist())
        epoch = next_stop
        where["epoch"] = epoch
        step = int(to_host(state.step))
        for k, e_loss in enumerate(epoch_losses):
            e = epoch - n_ep + k + 1
            if e % log_every == 0 or e == epoch:
                log.write({"epoch": e, "step": e * steps_per_epoch, "loss": float(e_loss),
                           "epochs_per_s": n_ep / dt})
        bar.update(epoch, force=epoch == end_epoch, loss=float(epoch_losses[-1]),
                   steps_per_s=n_ep * steps_per_epoch / dt)
        if epoch % ckpt_every == 0 or epoch == end_epoch:
            # Model selection: mean training loss over the epochs since the last checkpoint.
            sel = float(np.mean(window))
            window = []
            meta = {"epoch": epoch, "step": step, "loss": sel, "best_loss": min(best_loss, sel)}
            if sel < best_loss:
                best_loss = sel
                checkpoints.save(workdir, "best", step, state, meta)
            if validator is not None and epoch % validator.every == 0:
                scores = validator(state, epoch, step, meta)
                log.write({"epoch": epoch, "step": step, "validation": scores})
                bar.note(f"epoch {epoch}: validation " + ", ".join(
                    f"{k} {v:.4g}" for k, v in scores.items() if isinstance(v, float)))
            checkpoints.save(workdir, "latest", step, state, meta)
            where["saved_epoch"] = epoch
    bar.close()
    summary = {"epochs": epoch, "steps": int(to_host(state.step)), "best_loss": best_loss,
               "seconds": time.time() - t_start, "first_call_seconds": compile_s,
               "devices": n_dev, "steps_per_epoch": steps_per_epoch}
    if is_main:
        log.write({"event": "end", **summary})
    return summary
