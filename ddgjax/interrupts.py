"""Ctrl-C and SIGTERM: writes that must complete are finished first.

A checkpoint save or the swap of a sample directory runs inside
:func:`deferred`: a SIGINT or SIGTERM that arrives meanwhile is held until the
write is complete and then acted on as it would have been. The command lines
also turn SIGTERM into ``KeyboardInterrupt`` (:func:`sigterm_raises_interrupt`),
so both signals end a run the same way: one line and exit status 130.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_INTERRUPTED = 130


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def sigterm_raises_interrupt() -> None:
    """Make SIGTERM raise ``KeyboardInterrupt`` like SIGINT (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


@contextlib.contextmanager
def deferred():
    """Hold SIGINT and SIGTERM until the block has finished, then handle the first one.

    Outside the main thread (where handlers cannot be set) it does nothing. If
    the block raises, its exception wins and a held signal is dropped.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if held:
        handler = previous[held[0]]
        if callable(handler):
            handler(held[0], None)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), held[0])
