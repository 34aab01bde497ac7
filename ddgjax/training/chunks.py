"""The jitted calls of a chunk of epochs, planned on the host, and their background compile.

A chunk (the epochs up to a checkpoint boundary) is a list of calls (:class:`Call`) of
the setup's jitted chunk function (``Setup.chunk_fn``): without size buckets one call over
all its steps, or with a progress bar equal pieces of :func:`progress_piece_steps`
steps; with size buckets one call per step, in the epoch's seeded bucket order (one
compiled program per bucket shape). :func:`chunk_calls` is the one place that draws the
batches; the training loop runs its calls, and :func:`start_precompile` compiles the
first chunk's programs from their shapes while a fresh run initialises, so the loop's
first call finds its executable in JAX's compilation cache.
"""
from __future__ import annotations

import threading
from typing import NamedTuple

import jax
import numpy as np

from ddgjax import buckets, checkpoints, input_pipeline
from ddgjax.parallel import batch_sharded, put_global, replicate, replicated
from ddgjax.training.step import init_state

# With a progress bar, a chunk of S steps runs as equal pieces (one compile) of at least
# PROGRESS_MIN_STEPS steps, about PROGRESS_PIECES of them, and the bar moves as each
# finishes. (A host callback in every step instead cost a small model's step about a
# quarter of its time on a GPU: docs/performance.md.)
PROGRESS_PIECES = 10
PROGRESS_MIN_STEPS = 8


def progress_piece_steps(total: int) -> int:
    """The steps of each piece of a ``total``-step chunk: the smallest divisor of ``total``
    that is at least ``max(PROGRESS_MIN_STEPS, total / PROGRESS_PIECES)`` (``total`` when
    there is none below it)."""
    low = max(PROGRESS_MIN_STEPS, -(-total // PROGRESS_PIECES))
    return next((d for d in range(low, total) if total % d == 0), total)


class Call(NamedTuple):
    """One jitted call of a chunk: the training data ``data`` (an index into
    ``Setup.host_data()``), the batch indices ``idx`` (``int32[S, B]``, ``[S, R, B]`` for
    ``R`` stacked runs) and, with size buckets, the steps' loss weights ``weight``
    (``float32[S]``; None without)."""

    data: int
    idx: np.ndarray
    weight: np.ndarray | None


def chunk_calls(setup, seeds: list[int], first_epoch: int, end_epoch: int, stacked: bool,
                pieces: bool) -> tuple[list[Call], np.ndarray | None]:
    """The calls that train epochs ``first_epoch .. end_epoch - 1`` of the runs of ``seeds``
    (``setup``: a ``runs.Setup``), and the steps' loss weights ``[n_ep, steps_per_epoch]``
    (size buckets; None without).

    Each run's batches are those of a run of its seed alone (``input_pipeline`` or
    ``buckets.bucket_batches_for_epochs``: drawn from ``(seed, epoch)`` only). ``pieces``:
    the progress bar's equal pieces instead of one call (without buckets).
    """
    n_ep = end_epoch - first_epoch
    if setup.buckets is None:
        idx = np.stack([input_pipeline.batches_for_epochs(setup.num_graphs, setup.batch_size,
                                                          s, first_epoch, end_epoch)
                        for s in seeds], axis=1)
        if not stacked:
            idx = idx[:, 0]
        size = progress_piece_steps(len(idx)) if pieces else len(idx)
        return [Call(0, idx[lo:lo + size], None) for lo in range(0, len(idx), size)], None
    if stacked or len(seeds) != 1:
        raise ValueError("size buckets train one run per program")
    order, batches, weights = buckets.bucket_batches_for_epochs(setup.buckets, seeds[0],
                                                                first_epoch, end_epoch)
    calls = [Call(int(b), idx[None], w[None]) for b, idx, w in zip(order, batches, weights)]
    return calls, weights.reshape(n_ep, setup.steps_per_epoch)


def call_args(call: Call, data, mesh) -> tuple:
    """The device arguments of ``call`` after the state: ``data`` (the ``GraphBatch`` of
    ``call.data``, replicated), the indices sharded over the batch axis and, with size
    buckets, the replicated weights."""
    args = (data, put_global(call.idx, batch_sharded(mesh, call.idx.ndim - 1)))
    return args if call.weight is None else args + (replicate(call.weight, mesh),)


def _spec(shape, dtype, sharding) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype), sharding=sharding)


def first_chunk_specs(setup, state_spec, seeds: list[int], stacked: bool, end_epoch: int,
                      pieces: bool) -> list[tuple]:
    """The abstract arguments of the distinct programs among a fresh run's first chunk's
    calls, epochs ``0 .. end_epoch - 1`` (:func:`chunk_calls`): ``state_spec`` (the
    state's shapes and dtypes, leaves ``[R, ...]`` when ``stacked``) replicated, the
    training data, the indices sharded over the batch axis and any weights, as
    :func:`call_args` places them."""
    mesh = setup.mesh
    rep = replicated(mesh)
    state = jax.tree_util.tree_map(lambda x: _spec(x.shape, x.dtype, rep), state_spec)
    datas = setup.host_data()
    calls, _ = chunk_calls(setup, seeds, 0, end_epoch, stacked, pieces)
    programs = {}
    for c in calls:
        key = (c.data, c.idx.shape)
        if key in programs:
            continue
        d = datas[c.data]
        data = jax.tree_util.tree_map(lambda a: _spec(a.shape, a.dtype, rep), d)
        args = (state, data,
                _spec(c.idx.shape, c.idx.dtype, batch_sharded(mesh, c.idx.ndim - 1)))
        if c.weight is not None:
            args += (_spec(c.weight.shape, c.weight.dtype, rep),)
        programs[key] = args
    return list(programs.values())


class Precompile:
    """The first chunk's programs compiled in a background thread while the runs set up.

    A cold start spends seconds compiling the training chunk after the parameter
    initialisation has spent seconds compiling its own small programs. Both are
    independent, so the chunk compiles from abstract arguments (``first_chunk_specs``)
    while the host initialises; the loop's first call then finds the executable in JAX's
    compilation cache. ``join`` waits for it (never raises: a failed compile is left for
    the first call to repeat and report)."""

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


def start_precompile(setup, chunk_fn, seeds: list[int], stacked: bool, workdirs: list[str],
                     restart: bool, pieces: bool, stop_after_epochs) -> Precompile | None:
    """``Precompile`` of a fresh run's first chunk; None where the first chunk is not
    known before the restore (a workdir with checkpoints to resume from)."""
    config = setup.config
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
    return Precompile(chunk_fn, first_chunk_specs(setup, state_spec, seeds, stacked,
                                                  end_epoch, pieces))
