"""Train state, the data-parallel train step and the training loop.

Data parallelism follows the pmap pattern, written with ``jax.shard_map`` over
a 1-D mesh of every device (axis ``"data"``): each device takes a slice of the
batch, computes the gradient of its summed loss terms, and the gradients and
pair counts are summed over the named axis. With one device the same code runs
on a one-device mesh. Per-graph noise comes from ``fold_in(step_key, global
graph index)``, so the result does not depend on the number of devices.

Many steps run inside one ``jax.lax.scan`` (one jitted call per chunk of
steps), the small training sets live on the device, and each step gathers its
batch by index: the host only ships integer indices.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Callable

import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ddgjax import checkpoints, diffusion
from ddgjax.datasets import load_dataset, max_num_nodes, node_count_distribution
from ddgjax.graphs import graphs_to_batch
from ddgjax.models import build_model
from ddgjax.schedules import NoiseSchedule, make_schedule

AXIS = "data"


class TrainingError(RuntimeError):
    """Training cannot go on (bad config, non-finite loss, ...)."""


@flax.struct.dataclass
class TrainState:
    """Everything a step changes. ``ema_params`` equals ``params`` when EMA is off."""

    step: jax.Array
    params: Any
    ema_params: Any
    opt_state: Any


# ----------------------------------------------------------------------------
# Construction


def model_from_config(config: ml_collections.ConfigDict):
    """The Flax denoiser of ``config.model`` for ``config.diffusion.num_timesteps``."""
    name = config.model.name
    if name not in ("ppgn", "edp"):
        raise TrainingError(f"config.model.name: unknown model {name!r}; expected 'ppgn' or 'edp'")
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}.get(config.model.compute_dtype)
    if dtype is None:
        raise TrainingError(f"config.model.compute_dtype: expected 'float32' or 'bfloat16', "
                            f"got {config.model.compute_dtype!r}")
    kwargs = dict(config.model[name].to_dict())
    return build_model(name, config.diffusion.num_timesteps, compute_dtype=dtype, **kwargs)


def custom_loss_fn(config):
    """None for the discrete process; the Gaussian baseline's loss otherwise."""
    kind = config.diffusion.get("kind", "discrete")
    if kind == "discrete":
        return None
    if kind == "gaussian":
        from ddgjax import gaussian

        return gaussian.make_loss_fn(config)
    raise TrainingError(f"config.diffusion.kind: expected 'discrete' or 'gaussian', got {kind!r}")


def schedule_from_config(config) -> NoiseSchedule:
    return make_schedule(config.diffusion.schedule, config.diffusion.num_timesteps)


def make_optimizer(train_cfg, steps_per_epoch: int) -> optax.GradientTransformation:
    """Adam with the learning rate multiplied by ``lr_decay_per_epoch`` after each epoch."""
    lr = optax.exponential_decay(train_cfg.lr, transition_steps=steps_per_epoch,
                                 decay_rate=train_cfg.lr_decay_per_epoch, staircase=True)
    tx = optax.adam(lr, b1=train_cfg.b1, b2=train_cfg.b2)
    if train_cfg.grad_clip > 0:
        tx = optax.chain(optax.clip_by_global_norm(train_cfg.grad_clip), tx)
    return tx


def init_state(model, tx, key: jax.Array, max_nodes: int) -> TrainState:
    """Initialise parameters on a dummy batch of 2 graphs of ``max_nodes`` nodes."""
    adj = jnp.zeros((2, max_nodes, max_nodes), jnp.float32)
    mask = jnp.ones((2, max_nodes), bool)
    params = model.init(key, adj, mask, jnp.ones((2,), jnp.int32), jnp.full((2,), 0.25))
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, ema_params=params,
                      opt_state=tx.init(params))


def make_mesh(devices=None) -> Mesh:
    """A 1-D mesh over all (global) devices with axis ``"data"``."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (AXIS,))


# ----------------------------------------------------------------------------
# The step


def graph_keys(step_key: jax.Array, first_index, count: int) -> jax.Array:
    """``[count]`` keys ``fold_in(step_key, first_index + i)``: one per global graph slot."""
    idx = first_index + jnp.arange(count, dtype=jnp.int32)
    return jax.vmap(lambda i: jax.random.fold_in(step_key, i))(idx)


def make_train_chunk(model, tx, schedule: NoiseSchedule, loss_type: str, mesh: Mesh,
                     base_key: jax.Array, ema_decay: float = 0.0,
                     continuous_time: bool = False, loss_fn: Callable | None = None) -> Callable:
    """Build ``chunk(state, data_adj, data_mask, batch_idx) -> (state, losses)``, jitted.

    The loss is ``diffusion.training_loss`` with ``schedule`` / ``loss_type`` /
    ``continuous_time``, unless ``loss_fn(denoise_fn, keys [B], adj0, node_mask)
    -> diffusion.LossOutput`` is given (another noise process, e.g. the Gaussian
    baseline).

    Args of the returned function:
      state: replicated TrainState.
      data_adj: ``[G, N, N]`` the whole padded training set (replicated);
      data_mask: ``[G, N]`` (replicated). Index ``G - 1`` must be an empty graph
        (all-False mask), used to pad incomplete batches.
      batch_idx: ``int32[S, B]`` graph indices of S consecutive steps, sharded
        over the batch axis (B divisible by the number of devices).
    Returns: the state after S steps and ``float32[S]`` batch losses.
    """
    n_dev = mesh.devices.size

    def per_device(state, data_adj, data_mask, batch_idx):
        local_b = batch_idx.shape[1]
        first = jax.lax.axis_index(AXIS) * local_b

        def one_step(state, idx):
            adj0, mask = data_adj[idx], data_mask[idx]
            step_key = jax.random.fold_in(base_key, state.step)
            keys = graph_keys(step_key, first, local_b)

            def summed(params):
                denoise = lambda a, m, t, b: model.apply(params, a, m, t, b)
                if loss_fn is None:
                    out = diffusion.training_loss(denoise, keys, adj0, mask, schedule, loss_type,
                                                  continuous_time)
                else:
                    out = loss_fn(denoise, keys, adj0, mask)
                return out.per_graph.sum(), out.num_pairs.sum()

            (local_sum, local_pairs), grads = jax.value_and_grad(summed, has_aux=True)(state.params)
            total_pairs = jnp.maximum(jax.lax.psum(local_pairs, AXIS), 1.0)
            grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, AXIS) / total_pairs, grads)
            loss = jax.lax.psum(local_sum, AXIS) / total_pairs
            updates, opt_state = tx.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, updates)
            if ema_decay > 0:
                ema = jax.tree_util.tree_map(lambda e, p: ema_decay * e + (1 - ema_decay) * p,
                                             state.ema_params, params)
            else:
                ema = params
            return TrainState(state.step + 1, params, ema, opt_state), loss

        return jax.lax.scan(one_step, state, batch_idx)

    # check_vma=False gives the classic pmap semantics: the gradient of the
    # replicated parameters is each device's local gradient, and we sum it over
    # the axis ourselves. (With check_vma=True, JAX would already insert that
    # psum in the transpose, and ours would count it n_dev times.)
    sharded = jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(), P(), P(None, AXIS)),
                            out_specs=(P(), P()), check_vma=False)
    del n_dev
    return jax.jit(sharded)


# ----------------------------------------------------------------------------
# Host-side batching


def epoch_batches(num_graphs: int, batch_size: int, seed: int, epoch: int) -> np.ndarray:
    """``int32[steps, batch_size]`` shuffled graph indices of one epoch.

    The permutation depends only on (seed, epoch), so a resumed run sees the
    same batches. The last batch is padded with index ``num_graphs`` (the empty
    graph appended to the device copy of the data).
    """
    perm = np.random.default_rng([seed, epoch]).permutation(num_graphs)
    steps = math.ceil(num_graphs / batch_size)
    idx = np.full(steps * batch_size, num_graphs, dtype=np.int32)
    idx[:num_graphs] = perm
    return idx.reshape(steps, batch_size)


def put_global(x: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """Host array (identical on every process) -> global array with ``sharding``."""
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


# ----------------------------------------------------------------------------
# The loop


class Progress:
    """A one-line progress bar on stderr (a line per update when not a terminal)."""

    def __init__(self, total: int, start: int = 0, desc: str = "train", enabled: bool = True):
        self.total, self.start, self.desc = total, start, desc
        self.t0 = time.time()
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def update(self, done: int, **info):
        if not self.enabled:
            return
        elapsed = max(time.time() - self.t0, 1e-9)
        rate = (done - self.start) / elapsed
        frac = done / max(self.total, 1)
        bar = "#" * int(20 * frac) + "-" * (20 - int(20 * frac))
        extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in info.items())
        eta = (self.total - done) / rate if rate > 0 else float("nan")
        line = f"{self.desc} [{bar}] {done}/{self.total} {extra} eta={eta:.0f}s"
        if self.tty:
            sys.stderr.write("\r" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self):
        if self.enabled and self.tty:
            sys.stderr.write("\n")


class MetricsLog:
    """Appends JSON lines to ``workdir/metrics.jsonl`` (and TensorBoard via tensorboardX if present)."""

    def __init__(self, workdir: str, enabled: bool = True):
        self.enabled = enabled
        self.path = os.path.join(workdir, "metrics.jsonl")
        self.tb = None
        if enabled:
            try:
                from tensorboardX import SummaryWriter  # optional
                self.tb = SummaryWriter(os.path.join(workdir, "tensorboard"))
            except ImportError:
                pass

    def write(self, record: dict):
        if not self.enabled:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in record.items():
                if k != "step" and isinstance(v, (int, float)):
                    self.tb.add_scalar(k, v, record.get("step", 0))


def save_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
    os.replace(tmp, path)


def validate_config(config) -> None:
    """Raise TrainingError naming the field for values no step could use."""
    checks = [
        (config.train.batch_size >= 1, "train.batch_size", "a positive integer"),
        (config.train.num_epochs >= 1, "train.num_epochs", "a positive integer"),
        (config.train.lr > 0, "train.lr", "a positive number"),
        (0 < config.train.lr_decay_per_epoch <= 1, "train.lr_decay_per_epoch", "in (0, 1]"),
        (0 <= config.train.ema_decay < 1, "train.ema_decay", "in [0, 1)"),
        (config.train.checkpoint_every_epochs >= 1, "train.checkpoint_every_epochs", ">= 1"),
        (config.diffusion.loss in diffusion.LOSSES, "diffusion.loss", f"one of {diffusion.LOSSES}"),
        (config.diffusion.num_timesteps >= 1, "diffusion.num_timesteps", "a positive integer"),
        (config.data.max_nodes >= 0, "data.max_nodes", ">= 0 (0: automatic)"),
    ]
    for ok, field, expected in checks:
        if not ok:
            raise TrainingError(f"config.{field}: expected {expected}")
    if config.diffusion.continuous_time and (config.diffusion.loss != "simple"
                                             or config.model.name != "ppgn"):
        raise TrainingError("config.diffusion.continuous_time: only for PPGN with the 'simple' loss")


def prepare_data(config):
    """Load the dataset and pad its training split. Returns (dataset, batch, max_nodes)."""
    ds = load_dataset(config.data.source, seed=config.data.seed,
                      allow_pickle=config.data.allow_pickle)
    if not ds.train:
        raise TrainingError(f"{config.data.source}: the training split is empty")
    max_nodes = config.data.max_nodes or max_num_nodes(ds.train + ds.test + ds.val)
    batch = graphs_to_batch(ds.train, max_nodes, source=f"{config.data.source} (train split)")
    return ds, batch, max_nodes


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       stop_after_epochs: int | None = None, verbose: bool = True) -> dict:
    """Train per ``config`` in ``workdir``, resuming from its latest checkpoint.

    Writes ``config.json``, ``dataset.json`` (node-count distribution and max
    nodes), ``metrics.jsonl`` and the ``latest`` / ``best`` checkpoints.
    ``stop_after_epochs`` ends the run early (as if killed after that many
    epochs of this invocation), for tests of resumption.

    Returns a summary dict (epochs, steps, final and best loss, timings).
    """
    validate_config(config)
    is_main = jax.process_index() == 0
    ds, data, max_nodes = prepare_data(config)
    os.makedirs(workdir, exist_ok=True)
    G = data.adj.shape[0]

    mesh = make_mesh()
    n_dev = mesh.devices.size
    B = config.train.batch_size
    if B % n_dev:
        raise TrainingError(f"config.train.batch_size={B} must be divisible by the number of "
                            f"devices ({n_dev})")
    steps_per_epoch = math.ceil(G / B)
    model = model_from_config(config)
    schedule = schedule_from_config(config)
    tx = make_optimizer(config.train, steps_per_epoch)
    root = jax.random.key(config.train.seed)
    state = init_state(model, tx, jax.random.fold_in(root, 0), max_nodes)

    start_epoch, best_loss = 0, float("inf")
    if checkpoints.latest_step(workdir, "latest") is not None:
        try:
            state, meta = checkpoints.restore(workdir, "latest", state)
        except (ValueError, TypeError, KeyError, checkpoints.CheckpointError) as e:
            raise TrainingError(
                f"{workdir}: its checkpoint does not fit this config (different model, sizes "
                f"or max_nodes?); use a new --workdir or the run's own config.json "
                f"[{type(e).__name__}: {str(e).splitlines()[0][:200]}]") from e
        state = jax.tree_util.tree_map(jnp.asarray, state)
        start_epoch, best_loss = int(meta["epoch"]), float(meta.get("best_loss", float("inf")))
        if is_main:  # printed even when quiet: a resume should never be silent
            print(f"resuming from {workdir} at epoch {start_epoch} (step {int(state.step)})",
                  file=sys.stderr)

    repl = NamedSharding(mesh, P())
    idx_sharding = NamedSharding(mesh, P(None, AXIS))
    # The device copy of the data gets one extra empty graph used as batch padding.
    data_adj = np.concatenate([data.adj, np.zeros_like(data.adj[:1])])
    data_mask = np.concatenate([data.node_mask, np.zeros_like(data.node_mask[:1])])
    data_adj, data_mask = put_global(data_adj, repl), put_global(data_mask, repl)
    state = jax.device_put(state, repl)
    chunk_fn = make_train_chunk(model, tx, schedule, config.diffusion.loss, mesh,
                                jax.random.fold_in(root, 1), config.train.ema_decay,
                                config.diffusion.continuous_time, loss_fn=custom_loss_fn(config))

    # Written only now that the data, model and any checkpoint have loaded, so a
    # failed start never replaces the record of a good run.
    if is_main:
        save_json(os.path.join(workdir, "config.json"), json.loads(config.to_json_best_effort()))
        save_json(os.path.join(workdir, "dataset.json"), {
            "source": config.data.source, "name": ds.name, "max_nodes": int(max_nodes),
            "num_train": len(ds.train), "num_test": len(ds.test), "num_val": len(ds.val),
            "node_counts": node_count_distribution(ds.train).to_dict()})

    num_epochs = config.train.num_epochs
    end_epoch = num_epochs if stop_after_epochs is None else min(num_epochs,
                                                                 start_epoch + stop_after_epochs)
    ckpt_every = config.train.checkpoint_every_epochs
    log_every = config.train.log_every_epochs
    log = MetricsLog(workdir, enabled=is_main)
    bar = Progress(num_epochs, start_epoch, desc="epochs", enabled=verbose and is_main)
    epoch = start_epoch
    window: list[float] = []
    t_start = time.time()
    compile_s = None
    while epoch < end_epoch:
        # One jitted call runs up to `ckpt_every` epochs (ends at a checkpoint boundary).
        next_stop = min(end_epoch, (epoch // ckpt_every + 1) * ckpt_every)
        n_ep = next_stop - epoch
        idx = np.concatenate([epoch_batches(G, B, config.train.seed, e)
                              for e in range(epoch, next_stop)])
        t0 = time.time()
        state, losses = chunk_fn(state, data_adj, data_mask, put_global(idx, idx_sharding))
        losses = checkpoints.to_host(losses).reshape(n_ep, steps_per_epoch)
        dt = time.time() - t0
        if compile_s is None:
            compile_s = dt
        if not np.all(np.isfinite(losses)):
            bad = int(np.argmax(~np.all(np.isfinite(losses), axis=1)))
            raise TrainingError(
                f"non-finite training loss at epoch {epoch + bad + 1}; stopping. The last good "
                f"checkpoint in {workdir}/checkpoints is left as it was (try a lower "
                "train.lr or train.grad_clip)")
        epoch_losses = losses.mean(axis=1)
        window.extend(epoch_losses.tolist())
        epoch = next_stop
        step = int(checkpoints.to_host(state.step))
        for k, e_loss in enumerate(epoch_losses):
            e = epoch - n_ep + k + 1
            if e % log_every == 0 or e == epoch:
                log.write({"epoch": e, "step": e * steps_per_epoch, "loss": float(e_loss),
                           "epochs_per_s": n_ep / dt})
        bar.update(epoch, loss=float(epoch_losses[-1]), steps_per_s=n_ep * steps_per_epoch / dt)
        if epoch % ckpt_every == 0 or epoch == end_epoch:
            # Model selection: mean training loss over the epochs since the last checkpoint.
            sel = float(np.mean(window))
            window = []
            meta = {"epoch": epoch, "step": step, "loss": sel,
                    "best_loss": min(best_loss, sel)}
            if sel < best_loss:
                best_loss = sel
                checkpoints.save(workdir, "best", step, state, meta)
            checkpoints.save(workdir, "latest", step, state, meta)
    bar.close()
    total = time.time() - t_start
    summary = {"epochs": epoch, "steps": int(checkpoints.to_host(state.step)),
               "best_loss": best_loss,
               "seconds": total, "first_call_seconds": compile_s, "devices": n_dev,
               "steps_per_epoch": steps_per_epoch}
    if is_main:
        log.write({"event": "end", **summary})
    return summary
