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

    def write(self, record: dict):
        if not self.enabled:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in record.items():
                if k != "step" and isinstance(v, (int, float)):
                    self.tb.add_scalar(k, v, record.get("step", 0))
