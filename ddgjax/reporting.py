"""Reporting on the host: a progress bar, the metrics log, atomic JSON files."""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def write_json_atomic(path: str, obj: Any, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON to ``path`` via a temporary file and a rename.

    A crash mid-write leaves the old file (or none), never a truncated one.
    """
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent)
    os.replace(tmp, path)


class Progress:
    """A one-line progress bar on stderr (a line per update when not a terminal).

    Updates closer together than ``min_interval`` seconds (default: 0.5 s on a
    terminal, 3 s in a log file) are skipped, so it may be called every step.
    The rate and ETA count from the first update (after any compile).
    """

    def __init__(self, total: int, start: int = 0, desc: str = "train", enabled: bool = True,
                 min_interval: float | None = None):
        self.total, self.start, self.desc = total, start, desc
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.min_interval = (0.5 if self.tty else 3.0) if min_interval is None else min_interval
        self.first: tuple[float, float] | None = None   # (time, done) of the first update
        self.last_shown = float("-inf")
        self.done = start

    def update(self, done: float, force: bool = False, **info):
        """Show ``done`` of ``total`` (a float for fractional epochs) and ``info`` values."""
        self.done = done
        if not self.enabled:
            return
        now = time.time()
        if self.first is None:
            self.first = (now, done)
        if not force and now - self.last_shown < self.min_interval:
            return
        self.last_shown = now
        elapsed, advanced = now - self.first[0], done - self.first[1]
        rate = advanced / elapsed if elapsed > 0 and advanced > 0 else 0.0
        frac = min(done / max(self.total, 1), 1.0)
        bar = "#" * int(20 * frac) + "-" * (20 - int(20 * frac))
        extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in info.items())
        eta = f"{(self.total - done) / rate:.0f}s" if rate > 0 else "?"
        line = f"{self.desc} [{bar}] {int(done)}/{self.total} {extra} eta={eta}"
        if self.tty:
            sys.stderr.write("\r" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def note(self, message: str):
        """A line of its own (on a terminal, below the bar, which the next update redraws)."""
        if not self.enabled:
            return
        sys.stderr.write(("\n" if self.tty else "") + message + "\n")
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

    def truncate_after(self, epoch: int) -> None:
        """Drop records past ``epoch`` (and unreadable lines), atomically.

        Called when a run resumes from the checkpoint of ``epoch``: the epochs
        after it will be trained and logged again, so they must not appear twice.
        A record's epoch is its ``epoch`` field, or ``epochs`` for an end record.
        """
        if not self.enabled or not os.path.exists(self.path):
            return
        kept = []
        with open(self.path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue   # a line cut short by a kill
                if not isinstance(record, dict):
                    continue
                if record.get("epoch", record.get("epochs", 0)) <= epoch:
                    kept.append(json.dumps(record) + "\n")
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.writelines(kept)
        os.replace(tmp, self.path)

    def write(self, record: dict):
        if not self.enabled:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in record.items():
                if k != "step" and isinstance(v, (int, float)):
                    self.tb.add_scalar(k, v, record.get("step", 0))
