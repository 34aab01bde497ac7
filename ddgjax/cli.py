"""Shared command-line plumbing: one-line errors and multi-host start-up."""
from __future__ import annotations

import os
import sys

from ddgjax.graphs import GraphFormatError

USER_ERRORS: tuple = (GraphFormatError, ValueError, FileNotFoundError, KeyError)


def user_errors() -> tuple:
    """Exception types that mean bad input, reported as one line and exit code 1."""
    from ddgjax.checkpoints import CheckpointError
    from ddgjax.sampling import SamplingError
    from ddgjax.training import TrainingError
    from ddgjax.workdir import WorkdirError

    return USER_ERRORS + (TrainingError, SamplingError, CheckpointError, WorkdirError)


def fail(message: str, code: int = 1):
    """Print ``error: message`` (one line) on stderr and exit (traceback with DDGJAX_DEBUG=1)."""
    if os.environ.get("DDGJAX_DEBUG"):
        import traceback

        traceback.print_exc()
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(code)


def maybe_initialize_distributed(coordinator: str = "", num_processes: int = 0,
                                 process_id: int = -1) -> None:
    """Join a multi-host job when asked (flags) or when the environment sets one up.

    With no flags, ``jax.distributed.initialize()`` is called only if a
    cluster environment is detected (``JAX_COORDINATOR_ADDRESS``, SLURM, TPU
    pods, ...); a plain single machine starts nothing.
    """
    import jax

    # CPU-only hosts need a collectives backend for cross-process psum (no-op on GPU/TPU).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if coordinator:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
    elif os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("SLURM_NTASKS", "1") != "1":
        jax.distributed.initialize()


def parse_option_values(items, flag: str = "--option") -> dict:
    """``["grid=power:2", "final_pass=true", "eta=0.5"]`` -> ``{"grid": "power:2", ...}``.

    Values read as booleans (true/false), integers or floats where they parse as one,
    else as strings. Raises ValueError naming the flag for an item without ``=``.
    """
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{flag} {item!r}: expected NAME=VALUE")
        low = text.strip().lower()
        if low in ("true", "false"):
            value = low == "true"
        else:
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    value = text.strip()
        out[name.strip()] = value
    return out


def parse_flags(argv):
    """absl flag parser for ``app.run``: a bad flag or config override is one line, exit 2.

    ml_collections raises deep inside flag parsing for an unknown config key
    (``--config.train.lrr=1``); this turns that into ``error: ...``.
    """
    from absl import flags

    try:
        return flags.FLAGS(argv)
    except Exception as e:  # noqa: BLE001 - every parse failure is a usage error
        msg = str(e).replace("\\n", " ").replace("\\'", "'")
        if isinstance(e, AttributeError) or "Did you mean" in msg:
            msg = "unknown config key " + msg.strip("'\" ").replace("''", "'")
        print(f"error: {' '.join(msg.split())}", file=sys.stderr)
        sys.exit(2)
