"""The host side of training runs: what the runs of one config share (:class:`Setup`) and
one run in its workdir (:class:`TrainRun`): resume or restart, the metrics log, model
selection by loss (``best``) and by samples (``best_val``), checkpoint saves.

A run's keys come from its seed only: ``fold_in(key(seed), 0)`` initialises it and
``fold_in(key(seed), 1)`` is the base key of its steps (``ddgjax.training.step``), so a
resumed run draws what an unbroken one draws.
"""
from __future__ import annotations

import sys
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from ddgjax import buckets, checkpoints, conditioning, input_pipeline
from ddgjax.configuration import validate_config
from ddgjax.data import node_count_distribution
from ddgjax.models import model_from_config
from ddgjax.parallel import make_mesh, replicate, to_host
from ddgjax.processes import fit_to_data, process_from_config
from ddgjax.reporting import MetricsLog, Progress
from ddgjax.training.step import (init_state, make_optimizer, make_train_chunk,
                                  make_train_chunk_seeds)
from ddgjax.validation import Validator, check_validation_config
from ddgjax.workdir import (check_same_run, ensure_writable_dir, set_aside_previous_run,
                            write_run_record)


# metrics.jsonl holds the mean loss of every LOG_EVERY_EPOCHS-th epoch and of each chunk's
# last epoch (a checkpoint boundary or a stop).
LOG_EVERY_EPOCHS = 10


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss, a workdir of another run, ...)."""


def run_root_key(seed: int) -> jax.Array:
    """A run's root key: ``fold_in(root, 0)`` initialises it, ``run_base_key`` steps it."""
    return jax.random.key(int(seed))


def run_base_key(seed: int) -> jax.Array:
    """The key of a run's steps (``fold_in(base_key, step)`` per step)."""
    return jax.random.fold_in(run_root_key(seed), 1)


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
            f"checkpoint in {workdir}/checkpoints is left as it was (try a lower train.lr)")


class Setup:
    """What every run of one config shares: data, model, process, mesh, optimizer, and
    with size buckets (``config.data.buckets``) the bucket plan (else ``buckets`` is None)."""

    def __init__(self, config, devices, workdir: str):
        validate_config(config)
        check_validation_config(config)
        model_from_config(config)          # the model's fields checked before the data load
        ensure_writable_dir(workdir)
        self.ds, self.data, self.max_nodes = input_pipeline.load_training_data(config)
        # recorded in config.json: the data's prior density and condition width
        config = fit_to_data(config, self.data.adj, self.data.node_mask)
        self.conditions = input_pipeline.training_conditions(config, self.ds)
        cond_dim = 0
        if self.conditions is not None:
            cond_dim = self.conditions.dim
            self.data = self.data._replace(
                cond=conditioning.encode_graphs(self.conditions, self.ds.train))
        self.config = config
        self.model = model_from_config(config, cond_dim=cond_dim)
        self.process = process_from_config(self.config)
        self.dataset = input_pipeline.dataset_record(config.data.source, self.ds, self.max_nodes)
        if self.conditions is not None:
            self.dataset["conditions"] = self.conditions.to_dict()
        self.num_graphs = self.data.adj.shape[0]
        self.mesh = make_mesh(devices)
        self.n_dev = self.mesh.devices.size
        self.batch_size = B = config.train.batch_size
        if B % self.n_dev:
            raise TrainingError(f"config.train.batch_size={B} must be divisible by the number of "
                                f"devices ({self.n_dev})")
        self.steps_per_epoch = input_pipeline.steps_per_epoch(self.num_graphs, B)
        bounds = buckets.run_bucket_sizes(config, node_count_distribution(self.ds.train),
                                          self.max_nodes)
        self.buckets = None
        if bounds:
            self.buckets = buckets.plan_buckets(self.data.num_nodes, bounds, B, self.max_nodes,
                                                self.n_dev, config.data.bucket_max_batch)
            self.steps_per_epoch = self.buckets.steps_per_epoch
        self.tx = make_optimizer(config.train, self.steps_per_epoch)

    def host_data(self) -> list:
        """The training split as the chunks take it (numpy): one ``GraphBatch`` with the
        empty padding graph last, or with size buckets one per bucket."""
        if self.buckets is None:
            return [input_pipeline.device_copy(self.data)]
        return buckets.bucket_data(self.data, self.buckets)

    def device_data(self) -> list:
        """:meth:`host_data` on the devices (replicated)."""
        return [replicate(d, self.mesh) for d in self.host_data()]

    def describe_buckets(self) -> str:
        rows = self.buckets.describe()
        return ("size buckets (nodes: graphs x batch, steps, loss weight): " + "; ".join(
            f"{r['nodes']}: {r['graphs']} x {r['batch']}, {r['steps']}, {r['weight']:.3g}"
            for r in rows) + f" -> {self.steps_per_epoch} steps per epoch")

    def chunk_fn(self, base_key: jax.Array, stacked: bool) -> Callable:
        """The jitted chunk of this config: ``make_train_chunk`` (one run; weighted steps
        with size buckets) or ``make_train_chunk_seeds`` (``stacked``: several runs,
        ``base_key`` ``[R]``)."""
        ema = self.config.train.ema_decay
        if not stacked:
            return make_train_chunk(self.model, self.tx, self.process, self.mesh, base_key,
                                    ema, weighted=self.buckets is not None,
                                    cond_dropout=self.config.condition.dropout)
        if self.buckets is not None:
            # each seed interleaves its buckets in its own order: the runs' steps differ in
            # shape step by step, so they cannot share one program
            raise TrainingError(
                "config.data.buckets: several seeds in one program (train_seeds / --seeds) "
                "train without size buckets; train each seed on its own (train), or set "
                "config.data.buckets=''")
        return make_train_chunk_seeds(self.model, self.tx, self.process, self.mesh, base_key,
                                      ema, cond_dropout=self.config.condition.dropout)

    def config_for_seed(self, seed: int) -> ml_collections.ConfigDict:
        """The (data-fitted) config with ``train.seed = seed``: what a run of that seed records."""
        if int(self.config.train.seed) == int(seed):
            return self.config
        config = self.config.copy_and_resolve_references()
        config.train.seed = int(seed)
        return config


class TrainRun:
    """The host side of one run in its workdir: restart or resume checks, the restored
    state, the metrics log, model selection by loss (``best``) and by samples
    (``best_val``), checkpoint saves (through its ``writer``, open from :meth:`begin`
    until the loop closes it)."""

    def __init__(self, setup: Setup, config, workdir: str, restart: bool, verbose: bool,
                 label: str = ""):
        self.setup, self.config, self.workdir, self.label = setup, config, workdir, label
        self.seed = int(config.train.seed)
        self.is_main = jax.process_index() == 0
        ensure_writable_dir(workdir)
        if self.is_main and (unfinished := checkpoints.remove_unfinished_saves(workdir)):
            print(f"{label}removed {len(unfinished)} unfinished checkpoint save(s) of a run "
                  f"stopped while saving: {', '.join(unfinished)}", file=sys.stderr)
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
        """Set ``state``, ``start_epoch``, ``best_loss``, ``window`` from the workdir (or
        fresh), and the validator (which reads the best score so far from ``best_val``)."""
        s = self.setup
        self.state, self.start_epoch, self.best_loss, self.window = restore_or_init(
            self.workdir, s.model, s.tx, jax.random.fold_in(run_root_key(self.seed), 0),
            s.max_nodes)
        self.validator = Validator.from_config(self.config, s.ds, s.model, s.process,
                                               s.max_nodes, self.workdir)

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
        returns the last epoch's mean loss. Logged: every ``LOG_EVERY_EPOCHS``-th epoch
        and the chunk's last. With size buckets, ``weights`` (``[n_ep,
        steps]``, the steps' loss weights) make the epoch loss the weighted mean, i.e.
        the per-pair mean over the epoch's graphs."""
        n_ep, spe = losses.shape
        if weights is None:
            epoch_losses = losses.mean(axis=1)
        else:
            epoch_losses = (losses * weights).sum(axis=1) / np.maximum(weights.sum(axis=1),
                                                                         1e-30)
        self.window.extend(epoch_losses.tolist())
        for k, e_loss in enumerate(epoch_losses):
            e = epoch - n_ep + k + 1
            if e % LOG_EVERY_EPOCHS == 0 or e == epoch:
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
