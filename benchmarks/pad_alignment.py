"""Does padding to an aligned node count pay? PPGN 8 x 128 steps with ``n`` real nodes per
graph padded to ``N`` (masks as in training), a fresh process per row.

    python benchmarks/pad_alignment.py --row train:60:60:64 --row train:60:64:64 \
        --row sample:60:60:1024 --row sample:60:64:1024 [--reps 2] [--dtype bfloat16]
        [--option model.ppgn.fused=true] [--sample_option model.ppgn.pallas=true]
        [--out OUT.jsonl]

A row is ``train:n:N:batch`` (``bench_core.bench_train_step``: milliseconds per step,
median and minimum over ``--repeat`` calls of ``--steps`` steps) or ``sample:n:N:graphs``
(``bench_core.bench_sampling``, Algorithm 2, ``--T`` steps: seconds per call), for PPGN
8 x 128 unless the row ends in ``:hidden:blocks`` (e.g. ``train:17:20:64:32:6``). The model
is invariant to padding (tests/test_models.py), so ``N > n`` computes the same graphs'
outputs on a larger, possibly better aligned, array. Rows run in turn, ``--reps`` times
over, each in its own Python process (no compiled program shared between rows); each is
printed and appended to ``--out`` as one JSON line (``{"error": ...}`` in place of the
timings where the process failed or ran past ``--timeout``).
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ab_train_step import emit_row, python_row  # noqa: E402

TRAIN = """
import json, sys
sys.path.insert(0, {here!r})
import bench_core
r = bench_core.bench_train_step({dtype!r}, B={size}, N={N}, nodes={n}, options={options!r},
                                steps={steps}, repeat={repeat}, hidden={hidden},
                                blocks={blocks})
print("ROW " + json.dumps({{"ms_per_step": r["ms_per_step"], "ms_per_step_min":
                            r["ms_per_step_min"], "first_call_s": r["first_call_s"]}}))
"""

SAMPLE = """
import json, sys
sys.path.insert(0, {here!r})
import bench_core
r = bench_core.bench_sampling({dtype!r}, num={size}, N={N}, nodes={n}, T={T},
                              options={options!r}, repeat={repeat}, params_as_arg=True,
                              hidden={hidden}, blocks={blocks})
print("ROW " + json.dumps({{"seconds": r["seconds"], "seconds_min": r["seconds_min"],
                            "first_call_s": r["first_call_s"]}}))
"""


def parse_row(text: str) -> dict:
    """``"train:60:64:64"`` -> ``{"what": "train", "n": 60, "N": 64, "size": 64,
    "hidden": 128, "blocks": 8}`` (``"...:32:6"`` sets the last two); ValueError naming the
    row otherwise."""
    parts = text.split(":")
    if len(parts) not in (4, 6) or parts[0] not in ("train", "sample"):
        raise ValueError(f"--row {text!r}: expected train:n:N:batch or sample:n:N:graphs, "
                         "optionally followed by :hidden:blocks")
    try:
        n, N, size, *model = (int(v) for v in parts[1:])
    except ValueError:
        raise ValueError(f"--row {text!r}: the fields after the kind must be integers") from None
    hidden, blocks = model or (128, 8)
    if not 1 <= n <= N or min(size, hidden, blocks) < 1:
        raise ValueError(f"--row {text!r}: expected 1 <= n <= N and positive sizes")
    return {"what": parts[0], "n": n, "N": N, "size": size, "hidden": hidden, "blocks": blocks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--row", action="append", required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--option", action="append", default=[], help="config key=value, all rows")
    ap.add_argument("--sample_option", action="append", default=[],
                    help="config key=value for the sampling rows only")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--T", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per row")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    try:
        rows = [parse_row(r) for r in args.row]
    except ValueError as e:
        ap.error(str(e))
    for rep in range(args.reps):
        for row in rows:
            sample = row["what"] == "sample"
            code = (SAMPLE if sample else TRAIN).format(
                here=HERE, dtype=args.dtype, size=row["size"], N=row["N"], n=row["n"],
                hidden=row["hidden"], blocks=row["blocks"],
                options=args.option + (args.sample_option if sample else []),
                steps=args.steps, repeat=3 if sample else args.repeat, T=args.T)
            emit_row(dict(row, rep=rep, dtype=args.dtype,
                          **python_row(code, timeout=args.timeout)), args.out)


if __name__ == "__main__":
    main()
