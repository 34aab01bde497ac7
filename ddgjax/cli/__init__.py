"""The command lines (``ddgjax-train``, ``ddgjax-sample``; ``ddgjax-evaluate`` is
``ddgjax.evaluate``) and their shared plumbing: one-line errors, flag parsing,
``--config`` names, multi-host start-up.

Every command is ``main(argv) -> exit status`` (in-process testable) plus ``run()``
for the console script. Exit status: 0 done, 1 bad input or a fault (one line
``error: ...`` on stderr; a traceback only with ``DDGJAX_DEBUG=1``), 2 bad flags,
130 interrupted (Ctrl-C or SIGTERM).
"""
from __future__ import annotations

import os
import re
import sys

from ddgjax.graphs import GraphFormatError

USER_ERRORS: tuple = (GraphFormatError, ValueError, OSError, KeyError)
EXIT_USAGE = 2
HELP_FLAGS = ("-h", "--help", "-help", "--helpfull", "--helpshort")


def user_errors() -> tuple:
    """Exception types that mean bad input or a fault outside our code (a full disk,
    a read-only directory), reported as one line and exit code 1."""
    from ddgjax.checkpoints import CheckpointError
    from ddgjax.sampling import SamplingError
    from ddgjax.training import TrainingError
    from ddgjax.workdir import WorkdirError

    return USER_ERRORS + (TrainingError, SamplingError, CheckpointError, WorkdirError)


def one_line(message) -> str:
    """``message`` with its whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(message).split())


def report_error(message, code: int = 1) -> int:
    """Print ``error: message`` (one line) on stderr; returns ``code``. With
    ``DDGJAX_DEBUG=1`` the traceback of the exception being handled comes first."""
    if os.environ.get("DDGJAX_DEBUG"):
        import traceback

        traceback.print_exc()
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code


def fail(message: str, code: int = 1):
    """:func:`report_error`, then exit with ``code``."""
    sys.exit(report_error(message, code))


def wants_help(argv) -> bool:
    return any(a in HELP_FLAGS for a in argv[1:])


def print_help(doc: str, fv) -> None:
    """The command's docstring and its flags, on stdout."""
    print(doc.strip() + "\n\nflags:\n" + fv.get_help(include_special_flags=False))


def resolve_config_flag(argv: list) -> list:
    """``argv`` with the value of ``--config`` (a bundled name or ``FILE[:ARG]``) made an
    existing ``FILE[:ARG]`` (``ddgjax.configuration.resolve_config_arg``); ConfigError
    if it is neither. ``--config.KEY=VALUE`` overrides are left alone."""
    from ddgjax.configuration import resolve_config_arg

    out = list(argv)
    for i, arg in enumerate(out):
        m = re.fullmatch(r"(--?config)(=(.*))?", arg)
        if not m:
            continue
        if m.group(2) is not None:
            out[i] = f"{m.group(1)}={resolve_config_arg(m.group(3))}"
        elif i + 1 < len(out):
            out[i + 1] = resolve_config_arg(out[i + 1])
    return out


def parse_flag_values(fv, argv) -> int | None:
    """Parse ``argv`` into ``fv``; on failure print one line and return EXIT_USAGE.

    ml_collections raises deep inside flag parsing for an unknown config key
    (``--config.train.lrr=1``) and puts a whole traceback into the message of a
    config file that raises; both become one line here.
    """
    try:
        rest = fv(argv)[1:]
        if rest:
            raise ValueError(f"unexpected arguments: {' '.join(rest)}")
    except Exception as e:  # noqa: BLE001 - every parse failure is a usage error
        msg = str(e).replace("\\n", "\n").replace("\\'", "'")
        if "Error whilst parsing config file" in msg:
            # the last line of the embedded traceback is the config file's own error
            lines = [l for l in msg.strip().strip("'\"").splitlines() if l.strip()]
            msg = "config file: " + (lines[-1] if lines else msg)
        elif m := re.search(r"Unknown command line flag '([^']+)'(?:\. Did you mean: ([^?]+?) \?)?",
                            msg):
            msg = f"unknown flag --{m.group(1)}" + (
                f"; did you mean --{m.group(2).split(',')[0].strip()}?" if m.group(2) else
                " (--help lists the flags)")
        elif isinstance(e, AttributeError) or "Did you mean" in msg:
            msg = "unknown config key " + msg.strip("'\" ").replace("''", "'")
        print(f"error: {one_line(msg)}", file=sys.stderr)
        return EXIT_USAGE
    return None


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


COMPILE_CACHE_ENV = "DDGJAX_COMPILE_CACHE"
CACHE_OFF = ("", "none", "off", "0")


def compile_cache_dir(environ=os.environ) -> str | None:
    """Where the commands keep compiled XLA programs between runs, or None (off).

    ``$JAX_COMPILATION_CACHE_DIR`` when set (JAX's own setting wins); else
    ``$DDGJAX_COMPILE_CACHE`` (``none``/``off``/empty: no cache); else
    ``$XDG_CACHE_HOME/ddgjax/xla`` (``~/.cache/ddgjax/xla``).
    """
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        return environ["JAX_COMPILATION_CACHE_DIR"]
    path = environ.get(COMPILE_CACHE_ENV)
    if path is None:
        base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "ddgjax", "xla")
    return None if path.strip().lower() in CACHE_OFF else path


MIN_COMPILE_TIME_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def cache_min_compile_time(environ=os.environ) -> float | None:
    """The shortest compile the cache keeps: 0 (every program) unless
    ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` is set (None: JAX reads it itself).

    JAX's own default (1 s) skips the ~90 small programs of the op-by-op parameter init
    and the loop's small helpers, most of a rerun's set-up. With all of them cached, a
    rerun of the Ego-small paper config took 20.9 s from the train call against 29.9 s
    for the run that filled the cache (one H200; docs/performance.md)."""
    return None if environ.get(MIN_COMPILE_TIME_ENV) else 0.0


def enable_compile_cache() -> str | None:
    """Turn on JAX's persistent compilation cache in :func:`compile_cache_dir` (returned),
    for programs of any compile time (:func:`cache_min_compile_time`): a second
    ``ddgjax-sample`` or ``ddgjax-train`` of the same model loads its programs instead
    of compiling them again. A directory that cannot be created leaves the cache off,
    with a warning; nothing else changes."""
    import jax

    path = compile_cache_dir()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        print(f"warning: compile cache {path}: {e.strerror or e}; compiling without it "
              f"(set {COMPILE_CACHE_ENV}=none to silence this)", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    min_time = cache_min_compile_time()
    if min_time is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_time)
    return path


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
