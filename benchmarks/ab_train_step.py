"""A/B of the PPGN train step under environment settings, a fresh process per row.

    python benchmarks/ab_train_step.py --setting "" --setting "DDGJAX_X=1" [--reps 2]
        [--dtype bfloat16] [--option model.ppgn.fused=true] [--steps 20] [--repeat 5]
        [--out OUT.jsonl]

Each ``--setting`` is ``NAME=VALUE`` pairs joined by ``;`` (``""``: the environment as it
is), for switches read when a program is traced (``DDGJAX_*``) or when JAX starts
(``XLA_FLAGS``). The settings run in turn, ``--reps`` times over (A B A B ...), each in its
own Python process, so that no compiled program or cache is shared between rows.
Each row times ``bench_core.bench_train_step`` (PPGN 8 x 128, N = 60, batch 64 unless the
options say otherwise: median and minimum milliseconds per step over ``--repeat`` calls of
``--steps`` steps; and the device's peak memory in GiB, 0 where the device does not say)
and is printed and appended to ``--out`` as one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

ROW = """
import json, sys
sys.path.insert(0, {here!r})
import bench_core
r = bench_core.bench_train_step({dtype!r}, options={options!r}, steps={steps}, repeat={repeat})
import jax
stats = jax.devices()[0].memory_stats() or {{}}
print("ROW " + json.dumps({{"ms_per_step": r["ms_per_step"],
                            "ms_per_step_min": r["ms_per_step_min"],
                            "peak_gib": stats.get("peak_bytes_in_use", 0) / 2**30}}))
"""


def parse_setting(text: str) -> dict:
    """``"A=1;B=x"`` -> ``{"A": "1", "B": "x"}``; ValueError naming a pair without ``=``."""
    out = {}
    for pair in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--setting {text!r}: expected NAME=VALUE pairs joined by ';', "
                             f"got {pair!r}")
        out[name] = value
    return out


def python_row(code: str, env: dict | None = None, timeout: float = 600.0) -> dict:
    """Run ``code`` in a fresh Python process and return the JSON of its last ``ROW `` line,
    or ``{"error": ...}`` with the tail of its output (also on a timeout)."""
    try:
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    rows = [line[4:] for line in res.stdout.splitlines() if line.startswith("ROW ")]
    if res.returncode != 0 or not rows:
        return {"error": f"rc {res.returncode}: {(res.stderr or res.stdout)[-800:]}"}
    return json.loads(rows[-1])


def emit_row(row: dict, out: str = "") -> None:
    """Print ``row`` as one JSON line and append it to ``out`` (if given)."""
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def run_row(setting: dict, args, timeout: float = 600.0) -> dict:
    """One fresh process under ``setting``: ``{"ms_per_step", "ms_per_step_min"}``, or
    ``{"error": ...}`` with the tail of its output."""
    code = ROW.format(here=HERE, dtype=args.dtype, options=list(args.option),
                      steps=args.steps, repeat=args.repeat)
    return python_row(code, dict(os.environ, **setting), timeout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", action="append", required=True,
                    help="NAME=VALUE[;NAME=VALUE...], or '' for the environment as it is")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--option", action="append", default=[],
                    help="config override KEY=VALUE (bench_core.apply_options)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per row")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    try:
        settings = [(text, parse_setting(text)) for text in args.setting]
    except ValueError as e:
        ap.error(str(e))
    for rep in range(1, args.reps + 1):
        for text, setting in settings:
            row = {"setting": text, "rep": rep, "dtype": args.dtype, "options": args.option,
                   **run_row(setting, args, args.timeout)}
            emit_row(row, args.out)


if __name__ == "__main__":
    main()
