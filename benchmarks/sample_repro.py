"""Are a run's samples bit-reproducible? The same request (checkpoint, seed, node counts,
sampler) sampled several times in one process, each time recompiled; run it in several
processes (and with other ``XLA_FLAGS``) and compare the digests.

    python benchmarks/sample_repro.py --workdir W --checkpoint best_val --ema \
        --num 40 --repeats 2 --out OUT.json

Writes the SHA-256 of every repetition's adjacency array, the graphs' mean edge count,
the device and ``XLA_FLAGS``. Between repetitions the compiled sampler is dropped
(``jax.clear_caches`` and ddgjax's own executable cache), so each one compiles again.
That is not a new process: XLA's autotuning results likely outlive ``clear_caches``, so
only separate processes show whether another compile rounds otherwise. The persistent
compilation cache stays off here.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best_val", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--num", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--num_steps", type=int, default=0, help="0: the run's config")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import jax

    from ddgjax import sampling

    run = sampling.load_run(args.workdir, args.checkpoint, use_ema=args.ema)
    steps = sampling.configured_num_steps(run.config, args.num_steps)
    reps = []
    for _ in range(args.repeats):
        jax.clear_caches()
        sampling._COMPILED.clear()
        sampling._EXECUTABLES.clear()
        t0 = time.time()
        res = sampling.generate(run, args.num, seed=args.seed, batch_size=args.num,
                                num_steps=steps)
        reps.append({"sha256": hashlib.sha256(res["adj"].tobytes()).hexdigest(),
                     "edges_mean": float(res["adj"].sum() / 2 / args.num),
                     "seconds": time.time() - t0})
    out = {"device": jax.devices()[0].device_kind, "xla_flags": os.environ.get("XLA_FLAGS", ""),
           "workdir": args.workdir, "checkpoint": args.checkpoint, "ema": args.ema,
           "seed": args.seed, "num": args.num, "num_steps": steps,
           "compute_dtype": str(run.config.model.compute_dtype), "repeats": reps,
           "all_equal": len({r["sha256"] for r in reps}) == 1}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
