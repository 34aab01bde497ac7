"""One sampling row in a fresh process: 1024 Planar-60 graphs, 32 steps, bf16, the Pallas
kernels (``bench_core.bench_sampling``), with the kernel switches it ran under.

    DDGJAX_FP8_ACTIVATIONS=weights python benchmarks/sample_row.py OUT.json [--repeat 5]

The GPU call scripts run it once per setting, alternating, so that no compiled program
is shared between rows.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_core  # noqa: E402
from ddgjax.models import pallas_launch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--option", action="append", default=["model.ppgn.pallas=true"])
    ap.add_argument("--num", type=int, default=1024, help="graphs (a CPU smoke test: 4)")
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=32)
    a = ap.parse_args()
    r = bench_core.bench_sampling("bfloat16", num=a.num, N=a.nodes, hidden=a.hidden,
                                  blocks=a.blocks, T=a.steps, options=a.option,
                                  repeat=a.repeat)
    r["kernel_switches"] = pallas_launch.trace_settings_record()
    with open(a.out, "w") as fh:
        json.dump(r, fh, indent=1)
    print(a.out, round(r["seconds"], 4), r["seconds_all"])


if __name__ == "__main__":
    main()
