"""Model selection by samples: score a model's own graphs against held-out graphs.

During training (``config.validation.every_epochs > 0``) the training loop validates
at checkpoint boundaries: it samples ``config.validation.num_samples`` graphs with the
run's sampler settings (``config.sample``, its ``num_steps`` included: what
``ddgjax-sample`` draws), always from the same seed, and scores them with our MMDs
(paper protocol: degree, clustering, orbit and their average) against the reference
graphs, plus the fraction of valid graphs where the dataset has a validity rule
(``config.validation.validity``: ``"planar"``, ``"sbm"`` or ``""``). The checkpoint
with the best ``selection_key`` is kept as ``checkpoints/best_val``.

The sampling runs on the devices at the boundary; the scoring (host work: MMDs, and
for SBM validity a block-model fit per graph, seconds per validation) runs in a
background thread while training goes on (:meth:`Validator.start`), and its result is
applied (the comparison, the ``best_val`` save of the validated state, the log record)
by :meth:`Validator.finish` at a later boundary: in a one-process run at the first
boundary where the scoring is done, in a multi-process run at the next validation
(every process at the same boundary, since the saves are collective), and always
before the run ends or stops on an interrupt. The selection is the same as scoring in
place; only its record comes later.

The reference (``validation_reference``) is the dataset's validation split where its
file has one, otherwise a fixed slice of the training split (its first
``config.validation.num_samples`` graphs); every score records which.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import sys
import time
from typing import Any, Sequence

import jax
import networkx as nx

from ddgjax import checkpoints
from ddgjax.data import node_count_distribution
from ddgjax.parallel import to_host
from ddgjax.sampling import Run, configured_num_steps, generate

METRICS = ("mmd", "valid")


def validation_reference(ds, num_graphs: int) -> tuple[list[nx.Graph], str]:
    """``(graphs, name)``: the validation split (``"val"``) if the dataset has one, else the
    first ``num_graphs`` training graphs (``"train[:K]"``)."""
    if ds.val:
        return list(ds.val), "val"
    k = min(int(num_graphs), len(ds.train))
    return list(ds.train[:k]), f"train[:{k}]"


def score_graphs(graphs: Sequence[nx.Graph], reference: Sequence[nx.Graph],
                 validity: str = "") -> dict:
    """Paper-protocol MMDs of ``graphs`` against ``reference`` (``degree``, ``clustering``,
    ``orbit``, ``avg``), and with a ``validity`` rule the fraction ``valid``."""
    from ddgjax.metrics import evaluate_generated
    from ddgjax.metrics.validity import validity_mask

    ev = evaluate_generated(graphs, reference, protocol="paper")
    out = {k: float(ev[k]) for k in ("degree", "clustering", "orbit", "avg")}
    if validity:
        out["valid"] = float(validity_mask(graphs, validity).mean())
    return out


def selection_key(scores: dict, metric: str) -> tuple[float, ...]:
    """Lower is better. ``"mmd"``: the average MMD. ``"valid"``: the fraction of invalid
    graphs, ties broken by the average MMD. A NaN score ranks last."""
    if metric not in METRICS:
        raise ValueError(f"config.validation.metric: expected one of {METRICS}, got {metric!r}")
    avg = scores["avg"] if not math.isnan(scores["avg"]) else math.inf
    if metric == "mmd":
        return (avg,)
    return (1.0 - scores["valid"], avg)


def validation_samples(run, val_cfg, seed: int = 0) -> dict:
    """Sample ``val_cfg.num_samples`` graphs from ``run`` (a ``ddgjax.sampling.Run``; its
    process carries the ``config.sample`` sampler settings) in ``config.sample.num_steps``
    steps: ``{"graphs", "sample_seconds", "num_steps"}``. Sampling uses this process's
    devices only, so every process of a multi-host run draws the same graphs."""
    res = generate(run, int(val_cfg.num_samples), seed=seed,
                   batch_size=int(val_cfg.num_samples),
                   num_steps=configured_num_steps(run.config), devices=jax.local_devices())
    return {"graphs": res["graphs"],
            "sample_seconds": float(res["compile_seconds"] + res["seconds"]),
            "num_steps": int(res["num_steps"])}


_SCORING: concurrent.futures.ThreadPoolExecutor | None = None


def _scoring_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The one background thread that scores validation samples (shared by the runs of
    a process; the SBM fit inside it uses worker processes of its own)."""
    global _SCORING
    if _SCORING is None:
        _SCORING = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="ddgjax-validation")
    return _SCORING


def _timed_scores(graphs, reference, validity: str) -> dict:
    t0 = time.time()
    scores = score_graphs(graphs, reference, validity)
    return {**scores, "score_seconds": time.time() - t0}


@dataclasses.dataclass
class PendingValidation:
    """A validation whose samples are drawn and whose scoring runs in the background:
    the validated boundary (``epoch``, ``step``, the host ``state`` and checkpoint
    ``meta``), the scoring ``future`` and what sampling took."""
    epoch: int
    step: int
    state: Any
    meta: dict
    future: concurrent.futures.Future
    sample_seconds: float
    num_steps: int

    def done(self) -> bool:
        return self.future.done()


def check_validation_config(config) -> None:
    """ValueError naming the field for validation settings no run could use."""
    v = config.validation
    if int(v.every_epochs) == 0:
        return
    every, ckpt = int(v.every_epochs), int(config.train.checkpoint_every_epochs)
    if every < 0 or every % ckpt:
        raise ValueError(f"config.validation.every_epochs: expected 0 (off) or a positive "
                         f"multiple of config.train.checkpoint_every_epochs ({ckpt}), got {every}")
    if int(v.num_samples) < 1:
        raise ValueError("config.validation.num_samples: expected a positive integer")
    if v.validity not in ("", "planar", "sbm", "lobster"):
        raise ValueError(f"config.validation.validity: expected '', 'planar', 'sbm' or "
                         f"'lobster', got {v.validity!r}")
    if v.metric == "valid" and not v.validity:
        raise ValueError("config.validation.metric='valid' needs a rule in "
                         "config.validation.validity ('planar', 'sbm' or 'lobster')")
    selection_key({"avg": 0.0, "valid": 1.0}, v.metric)  # validates the metric


class Validator:
    """Model selection by samples (``ddgjax.validation``) inside the training loop.

    At a checkpoint boundary, :meth:`start` samples the model of the host train state
    (EMA parameters where ``config.sample.use_ema`` and EMA is on) and scores the samples
    in a background thread; :meth:`finish` waits for the scores, saves
    ``checkpoints/best_val`` when they beat the best so far (kept across resumptions in
    the ``best_val`` checkpoint's meta) and returns them. Calling the validator does
    both at once.
    """

    def __init__(self, config, reference, reference_name, model, process, max_nodes,
                 node_counts, workdir):
        self.config, self.reference, self.reference_name = config, reference, reference_name
        self.model, self.process, self.max_nodes = model, process, max_nodes
        self.node_counts, self.workdir = node_counts, workdir
        self.every = int(config.validation.every_epochs)
        self.metric = config.validation.metric
        self.use_ema = bool(config.sample.use_ema) and config.train.ema_decay > 0
        self.best = None
        step = checkpoints.latest_step(workdir, "best_val")
        if step is not None:
            self.best = self._recorded_best(workdir, step)

    def _recorded_best(self, workdir: str, step: int):
        """The selection key of the ``best_val`` checkpoint, or None (with a warning) when
        it was chosen by another ``validation.metric`` or cannot be read (an unreadable
        one is set aside like an unreadable ``latest``): the next validation then
        starts the comparison again."""
        main = jax.process_index() == 0
        try:
            best_meta = checkpoints.restore_meta(workdir, "best_val")
        except checkpoints.UnreadableCheckpointError as e:
            moved = checkpoints.set_aside_on_all_hosts(workdir, "best_val", step)
            if moved is not None:
                print(f"warning: {e}; moved it to {moved}; best_val is chosen again from the "
                      "next validation on", file=sys.stderr)
            return None
        recorded = best_meta.get("validation_metric")
        if recorded is not None and recorded != self.metric:
            if main:
                print(f"warning: {workdir}: checkpoints/best_val was chosen by "
                      f"validation.metric={recorded!r}, this run validates by {self.metric!r}: "
                      "the next validation replaces it", file=sys.stderr)
            return None
        return tuple(best_meta["validation_key"])

    @classmethod
    def from_config(cls, config, ds, model, process, max_nodes, workdir):
        """None unless ``config.validation.every_epochs > 0``."""
        v = config.validation
        if int(v.every_epochs) == 0:
            return None
        try:  # the sampler validation will build, checked before any epoch is trained
            process.sampler(configured_num_steps(config))
        except ValueError as e:
            raise ValueError(f"config.validation (it samples with the config.sample settings, "
                             f"num_steps included): {e}") from e
        reference, name = validation_reference(ds, int(v.num_samples))
        return cls(config, reference, name, model, process, max_nodes,
                   node_count_distribution(ds.train), workdir)

    def start(self, state, epoch: int, step: int, meta: dict) -> PendingValidation:
        """Sample the model of ``state`` (a host copy of the train state at this boundary)
        now, and start scoring the samples in the background."""
        params = to_host(state.ema_params if self.use_ema else state.params)
        run = Run(self.config, self.model, self.process, params, self.max_nodes,
                  self.node_counts, meta)
        samples = validation_samples(run, self.config.validation,
                                     seed=int(self.config.train.seed))
        future = _scoring_pool().submit(_timed_scores, samples["graphs"], self.reference,
                                        self.config.validation.validity)
        return PendingValidation(int(epoch), int(step), state, dict(meta), future,
                                 samples["sample_seconds"], samples["num_steps"])

    def finish(self, pending: PendingValidation, save=None) -> dict:
        """Wait for ``pending``'s scores (an error of the scoring is raised here); save its
        state as ``best_val`` when it is the best so far, with ``save(kind, step, state,
        meta)`` (the training loop's background ``CheckpointWriter.save``; default: a
        synchronous ``checkpoints.save``). Returns the scores."""
        scores = {**pending.future.result(), "sample_seconds": pending.sample_seconds,
                  "num_steps": pending.num_steps}
        key = selection_key(scores, self.metric)
        scores = {**scores, "reference": self.reference_name,
                  "params": "ema" if self.use_ema else "raw"}
        if self.best is None or key < self.best:
            self.best = key
            meta = {**pending.meta, "validation": scores, "validation_key": list(key),
                    "validation_metric": self.metric}
            if save is None:
                checkpoints.save(self.workdir, "best_val", pending.step, pending.state, meta)
            else:
                save("best_val", pending.step, pending.state, meta)
        return scores

    def __call__(self, state, epoch: int, step: int, meta: dict, save=None) -> dict:
        """Score ``state`` in place (``start`` then ``finish``); returns the scores."""
        return self.finish(self.start(state, epoch, step, meta), save)
