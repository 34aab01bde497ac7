"""The training loop: chunks of epochs on the devices, checkpoint boundaries on the host.

One chunk runs the epochs up to a checkpoint boundary (``chunks.chunk_calls``: one
jitted call, pieces of one with a progress bar, or one per step with size buckets). The
host work of a chunk (its losses, the divergence check, the metrics log, model selection
by samples, the checkpoint saves) runs once the next chunk's calls are queued, so the
device trains on meanwhile. Checkpoints are written in the background
(``checkpoints.CheckpointWriter``, one per run), and the loop waits for all of them
before it returns or reports an interruption.

Faults: a workdir holding another run (other data, model or process) is refused
(``ddgjax.workdir.check_same_run``; ``restart=True`` sets it aside); an unreadable
``latest`` checkpoint falls back to ``best`` with a warning; Ctrl-C or SIGTERM raises
:class:`TrainingInterrupted`, whose text says where the run stopped, after the
boundary in progress is saved.

The loop serves one run (:func:`train`) or several seeds of one config advanced by one
program (``ddgjax.training.seeds``).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Callable

import jax
import ml_collections
import numpy as np

from ddgjax import checkpoints
from ddgjax.interrupts import deferred
from ddgjax.parallel import replicate, to_host
from ddgjax.reporting import Progress
from ddgjax.training.chunks import (Precompile, call_args, chunk_calls, start_precompile)
from ddgjax.training.runs import Setup, TrainRun, check_finite, run_base_key

# The loop queues up to this many jitted calls ahead of reading their losses: all the
# pieces of a chunk with a progress bar, and as many steps of a chunk with size buckets
# (one call per step). Each queued call holds its output state until it runs.
CALLS_IN_FLIGHT = 16


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped ``train``; the text says at which epoch and where a
    resume starts. Checkpoints are complete (a save in progress was finished)."""


def train(config: ml_collections.ConfigDict, workdir: str, *,
          stop_after_epochs: int | None = None, verbose: bool = True, devices=None,
          restart: bool = False) -> dict:
    """Train per ``config`` in ``workdir``, resuming from its latest checkpoint.

    Writes ``config.json`` and ``dataset.json`` (``ddgjax.workdir``),
    ``metrics.jsonl`` and the ``latest`` / ``best`` checkpoints (model selection:
    the lowest mean training loss between checkpoints, as in the paper), and with
    ``config.validation.every_epochs`` the ``best_val`` checkpoint (model selection by
    samples, ``ddgjax.validation``).
    ``stop_after_epochs`` ends the run early (as if killed after that many
    epochs of this invocation), for tests of resumption. ``devices`` (default:
    all) are the devices of the data-parallel mesh. A workdir holding a run with
    other data, model or process settings is refused unless ``restart``, which
    moves that run into ``workdir/replaced-<time>/`` and starts over.

    Returns a summary dict (epochs, steps, best loss, timings). Raises
    TrainingInterrupted (a KeyboardInterrupt) on Ctrl-C or SIGTERM.
    """
    return interruptible(lambda where: _train(config, workdir, stop_after_epochs, verbose,
                                              devices, restart, where), [workdir])


def _train(config, workdir, stop_after_epochs, verbose, devices, restart, where) -> dict:
    """The body of :func:`train`; updates ``where`` as epochs pass."""
    setup = Setup(config, devices, workdir)
    seed = int(setup.config.train.seed)
    chunk_fn = setup.chunk_fn(run_base_key(seed), stacked=False)
    bar_enabled = verbose and jax.process_index() == 0
    precompile = start_precompile(setup, chunk_fn, [seed], False, [workdir], restart,
                                  bar_enabled, stop_after_epochs)
    run = TrainRun(setup, setup.config, workdir, restart, verbose)
    where["epoch"] = run.start_epoch
    bar = Progress(setup.config.train.num_epochs, run.start_epoch, desc="epochs",
                   enabled=bar_enabled)
    if setup.buckets is not None and verbose and run.is_main:
        print(setup.describe_buckets(), file=sys.stderr)
    state = replicate(run.state, setup.mesh)
    return loop(setup, [run], chunk_fn, state, False, bar, stop_after_epochs, where,
                precompile)[0]


def interruptible(body: Callable[[dict], dict], workdirs: list[str]) -> dict:
    """``body(where)``, with Ctrl-C and SIGTERM turned into TrainingInterrupted saying
    where the run stopped (``where``: see :func:`interrupted_message`)."""
    # how far the run got, for the message (the loop has finished the checkpoint writes
    # in flight before an interrupt gets here: loop's ExitStack closes the writers)
    where = {"epoch": None, "saved_epoch": None}
    # A start that fails leaves no empty workdir behind it (the parent of seed runs too).
    fresh = [w for w in dict.fromkeys(workdirs + [os.path.dirname(w) for w in workdirs])
             if w and not os.path.exists(w)]
    try:
        return _worded_interrupts(body, where, workdirs)
    except BaseException:
        for w in fresh:  # children first: seed workdirs come before their parent
            with contextlib.suppress(OSError):
                os.rmdir(w)  # only if empty: what a run wrote stays
        raise


def _worded_interrupts(body, where: dict, workdirs: list[str]) -> dict:
    """``body(where)``, a KeyboardInterrupt turned into TrainingInterrupted."""
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


def _progress_report(bar: Progress, steps_per_epoch: int, where: dict):
    """``report(steps_done, losses)`` for the bar between jitted calls (None without a bar):
    reading ``losses`` waits for the call that made them, while the next one runs."""
    if not bar.enabled:
        return None

    def report(step, losses):
        loss = float(np.mean(np.asarray(to_host(losses))[-1]))
        where["epoch"] = int(step) // steps_per_epoch
        bar.update(int(step) / steps_per_epoch, loss=loss)

    return report


def loop(setup: Setup, runs: list[TrainRun], chunk_fn, state, stacked: bool, bar: Progress,
         stop_after_epochs, where, precompile: Precompile | None = None) -> list[dict]:
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


def _epochs(setup: Setup, runs: list[TrainRun], chunk_fn, state, stacked: bool, bar: Progress,
            stop_after_epochs, where, precompile: Precompile | None) -> list[dict]:
    """The body of :func:`loop`, with the runs' checkpoint writers open.

    One chunk runs up to a checkpoint boundary. The host work of a chunk (reading
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
    report = _progress_report(bar, spe, where)
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
            # One chunk runs up to `ckpt_every` epochs (ends at a checkpoint boundary).
            next_stop = min(end_epoch, (epoch // ckpt_every + 1) * ckpt_every)
            if epoch == start_epoch and bar.enabled:
                shapes = "" if setup.buckets is None else f", one per bucket: {len(device_data)}"
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


def _run_epochs(setup: Setup, runs: list[TrainRun], chunk_fn, state, device_data, epoch: int,
                end_epoch: int, stacked: bool, report: Callable | None = None,
                after_queued: Callable | None = None):
    """Queue the calls of epochs ``epoch .. end_epoch - 1`` (``chunks.chunk_calls``):
    ``(state, losses, step weights [n_ep, spe] or None)``, ``losses`` the calls' device
    arrays (``np.concatenate`` of them on the host: ``[n_ep * spe, R]``, or
    ``[n_ep * spe]`` for one run). Every call updates the same state.

    Up to ``CALLS_IN_FLIGHT`` calls are queued ahead of the host: ``after_queued()`` (the
    loop's host work for the previous chunk) runs once that many (or all) are queued,
    and ``report(steps_done, losses)`` follows each call in order, reading its losses
    (which waits for it) only once the calls after it are queued.
    """
    spe = setup.steps_per_epoch
    calls, weights = chunk_calls(setup, [run.seed for run in runs], epoch, end_epoch, stacked,
                                 report is not None)
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

    for c in calls:
        state, loss = chunk_fn(state, *call_args(c, device_data[c.data], setup.mesh))
        losses.append(loss)
        done.append((done[-1] if done else 0) + len(c.idx))
        if len(losses) == min(CALLS_IN_FLIGHT, len(calls)) and after_queued is not None:
            after_queued()  # exactly once: every chunk makes at least one call
        settle(len(losses) - CALLS_IN_FLIGHT)
    if report is not None:
        settle(len(losses))
    return state, losses, weights
