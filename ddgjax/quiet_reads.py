"""Quiet failed checkpoint reads: what Orbax and asyncio print around a read that fails,
which ``ddgjax.checkpoints`` reports once, in one line, instead.

* :func:`echoes_dropped` and :func:`settle_failed_read` around each read: the ignored
  ``RuntimeError: Event loop is closed`` and asyncio's logs of the reads a failed one
  left in flight;
* a filter on the ``absl`` logger (installed on import) for Orbax's ERROR log of an
  unparsable ``_CHECKPOINT_METADATA``.
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import time

# The most a failed read waits for the array reads it left in flight (settle_failed_read).
SETTLE_SECONDS = 5.0
# What asyncio logs of a read left in flight when it is collected.
ASYNCIO_ECHOES = ("exception was never retrieved", "Task was destroyed but it is pending")


@contextlib.contextmanager
def echoes_dropped():
    """Around an Orbax read: the echoes of a failed one are dropped, nothing else.

    Orbax reads a checkpoint's arrays concurrently (TensorStore operations, in threads of
    their own) from an event loop that it closes as soon as one read fails. The reads
    still in flight then finish onto the closed loop, which Python reports as an ignored
    ``RuntimeError: Event loop is closed``, and asyncio logs each of them when it is
    collected ("Task exception was never retrieved", "Task was destroyed but it is
    pending"). The failure itself is reported once, as UnreadableCheckpointError; inside
    this block those echoes are dropped (any other ignored exception or log record still
    goes through), and :func:`settle_failed_read` waits for the stragglers."""
    previous_hook = sys.unraisablehook

    def hook(unraisable):
        exc = unraisable.exc_value
        if not (isinstance(exc, RuntimeError) and "Event loop is closed" in str(exc)):
            previous_hook(unraisable)

    def keep(record) -> bool:
        message = record.getMessage()
        return not any(echo in message for echo in ASYNCIO_ECHOES)

    log = logging.getLogger("asyncio")
    sys.unraisablehook = hook
    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)
        sys.unraisablehook = previous_hook


def settle_failed_read() -> None:
    """Inside :func:`_echoes_dropped`, after a failed read: wait (at most
    ``SETTLE_SECONDS``) until no asyncio future of a closed event loop is left, i.e. the
    reads left in flight have finished and been collected. Call it outside the
    ``except`` block of the failure: the caught exception's traceback holds them."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        gc.collect()
        stray = any(isinstance(x, asyncio.Future) and x.get_loop().is_closed()
                    for x in gc.get_objects())
        if not stray or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _not_a_metadata_parse_error(record) -> bool:
    """Drops Orbax's ERROR log of an unparsable ``_CHECKPOINT_METADATA`` (it logs one each
    time a manager lists a damaged checkpoint): every read of it fails, and that failure
    is reported once, naming the checkpoint (UnreadableCheckpointError)."""
    return not (record.levelno >= logging.ERROR and "orbax" in record.pathname
                and "Failed to json parse Metadata file" in record.getMessage())


logging.getLogger("absl").addFilter(_not_a_metadata_parse_error)
