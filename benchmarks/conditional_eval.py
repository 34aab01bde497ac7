"""Sample a conditional run (``config.condition``) for several requests and guidance weights,
in one process (each batch shape compiles once for every weight), and write each request's
graphs and the sampling times.

    python benchmarks/conditional_eval.py --workdir W --labels spectre_planar_64,spectre_sbm \\
        --guidance 0,1,2 --num_samples 256 --out OUT
    python benchmarks/conditional_eval.py --workdir W --property communities=2,3,4,5 \\
        --guidance 0,1 --num_samples 64 --out OUT

Writes ``OUT/<request>_w<w>.json.gz`` (the graphs; ``generated_by`` records the label or
property, the guidance and the sampler) and ``OUT/conditional_times.json`` (seconds per
graph and per step of every request, compiling apart). Score the files with
``benchmarks/check_samples.py`` against the requested family's test graphs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import jax

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.data import write_graph_list  # noqa: E402
from ddgjax.sampling import configured_num_steps, generate  # noqa: E402
from ddgjax.trained import load as load_model  # noqa: E402


def requests(args) -> list[tuple[str, dict]]:
    """``(name, generate's condition keywords)`` of every requested label or property value."""
    out = [(label, {"label": label}) for label in filter(None, args.labels.split(","))]
    if args.property:
        name, _, values = args.property.partition("=")
        out += [(f"{name}{v}", {"properties": {name: float(v)}}) for v in values.split(",")]
    if not out:
        raise SystemExit("give --labels and/or --property")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True, help="a run's workdir or pretrained:FILE.npz")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--labels", default="", help="comma-separated class labels")
    ap.add_argument("--property", default="", help="NAME=V1,V2,...: one request per value")
    ap.add_argument("--guidance", default="0", help="comma-separated guidance weights")
    ap.add_argument("--num_samples", type=int, default=256)
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--num_steps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    run = load_model(args.workdir, args.checkpoint).run   # a workdir or pretrained:FILE
    steps = configured_num_steps(run.config, args.num_steps)
    os.makedirs(args.out, exist_ok=True)
    times = []
    for name, cond in requests(args):
        for w in (float(x) for x in args.guidance.split(",")):
            res = generate(run, args.num_samples, seed=args.seed, batch_size=args.batch_size,
                           num_steps=steps, guidance=w, **cond)
            path = os.path.join(args.out, f"{name}_w{w:g}.json.gz")
            write_graph_list(path, res["graphs"], name=f"{name} w={w:g}", generated_by={
                "workdir": args.workdir, "checkpoint": run.checkpoint,
                "checkpoint_epoch": run.meta.get("epoch"), "seed": args.seed,
                "sampler": res["sampler"], "device": jax.devices()[0].device_kind})
            row = {"request": name, "guidance": w, "num_samples": args.num_samples,
                   "seconds": res["seconds"], "compile_seconds": res["compile_seconds"],
                   "seconds_per_graph": res["seconds"] / args.num_samples,
                   "num_steps": res["num_steps"],
                   "ms_per_step_per_graph": 1e3 * res["seconds"] / args.num_samples
                   / res["num_steps"]}
            times.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "conditional_times.json"), "w") as f:
        json.dump({"device": jax.devices()[0].device_kind, "workdir": args.workdir,
                   "rows": times}, f, indent=1)


if __name__ == "__main__":
    main()
