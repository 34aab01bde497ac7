"""Several seeds of one config trained as one program, each run as if trained alone.

The state leaves carry a leading run axis and one jitted step advances every run
(``step.make_train_chunk_seeds``: ``vmap`` over the runs), which keeps small models from
being bound by kernel launches, while each run keeps its own workdir, keys, batch order,
metrics log, checkpoints and model selection (the loop of ``ddgjax.training.loop``).
"""
from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from ddgjax.parallel import replicate, to_host
from ddgjax.reporting import Progress
from ddgjax.training.chunks import start_precompile
from ddgjax.training.loop import interruptible, loop, train
from ddgjax.training.runs import Setup, TrainingError, TrainRun, run_base_key
from ddgjax.workdir import WorkdirError, read_run_record


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
    Size buckets (``config.data.buckets``) are refused: each seed interleaves its
    buckets in its own order.

    Resumes every run from its own checkpoint. Runs found at different epochs (a seed
    added to a set, a kill between two runs' saves) are first brought to the furthest
    one's epoch one by one with ``train``, then go on together. ``restart`` sets
    aside what each run's workdir holds. Returns ``{"seeds", "workdirs", "runs":
    [summary per seed], ...}`` with the timings of the shared program. Raises
    TrainingInterrupted on Ctrl-C or SIGTERM (no run is left between two saves of a
    checkpoint boundary).
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise TrainingError("train_seeds: no seeds given")
    if len(set(seeds)) != len(seeds):
        raise TrainingError(f"train_seeds: repeated seeds in {seeds}")
    workdirs = [seed_workdir(workdir, s) for s in seeds]
    return interruptible(lambda where: _train_seeds(config, workdir, seeds, stop_after_epochs,
                                                    verbose, devices, restart, where), workdirs)


def _train_seeds(config, workdir, seeds, stop_after_epochs, verbose, devices, restart,
                 where) -> dict:
    """The body of :func:`train_seeds`."""
    setup = Setup(config, devices, workdir)
    chunk_fn = setup.chunk_fn(jnp.stack([run_base_key(s) for s in seeds]), stacked=True)
    if not restart:
        for s in seeds:
            _check_seed_record(seed_workdir(workdir, s), s)
    bar_enabled = verbose and jax.process_index() == 0
    workdirs = [seed_workdir(workdir, s) for s in seeds]
    precompile = start_precompile(setup, chunk_fn, list(seeds), True, workdirs, restart,
                                  bar_enabled, stop_after_epochs)
    width = max(len(str(s)) for s in seeds)
    runs = [TrainRun(setup, setup.config_for_seed(s), seed_workdir(workdir, s), restart,
                     verbose, label=f"seed {s:>{width}}: ") for s in seeds]
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
    summaries = loop(setup, runs, chunk_fn, state, True, bar, stop_after_epochs, where,
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
