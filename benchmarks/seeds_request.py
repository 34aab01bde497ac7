"""Several sampling seeds of a run trained in size buckets: one ``generate`` call per seed
against ``generate_seeds`` (all seeds in one request), wall time and compile time of each,
and a check that both give the same graphs (in float32; in bfloat16 the other batch
shapes move a few draws, ``ddgjax.sampling``'s docstring).

    python benchmarks/seeds_request.py --workdir W --num 40 --seeds 5 --num_steps 64 [--out F]

Without ``--workdir`` it first trains the test config in buckets 12 / 15 / 20 for one
epoch (a CPU-sized demonstration). Each way starts from empty compile caches.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from ddgjax import sampling, training  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="", help="a trained run (default: train a tiny one)")
    ap.add_argument("--checkpoint", default="best")
    ap.add_argument("--num", type=int, default=40, help="graphs per seed")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--num_steps", type=int, default=8)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tmp = None
    workdir = a.workdir
    if not workdir:
        from configs import test as test_config
        cfg = test_config.get_config()
        cfg.data.buckets = "12,15,"
        cfg.train.num_epochs = 1
        tmp = tempfile.mkdtemp()
        workdir = os.path.join(tmp, "run")
        training.train(cfg, workdir, verbose=False)
    run = sampling.load_run(workdir, a.checkpoint)
    seeds = list(range(a.seeds))
    kw = dict(batch_size=a.num, num_steps=a.num_steps)
    sampling.clear_compiled()
    t0 = time.time()
    loop = [sampling.generate(run, a.num, seed=s, **kw) for s in seeds]
    loop_s = time.time() - t0
    sampling.clear_compiled()
    t0 = time.time()
    merged = sampling.generate_seeds(run, a.num, seeds, **kw)
    merged_s = time.time() - t0
    row = {"device": jax.devices()[0].device_kind, "workdir": a.workdir or "(test config, "
           "buckets 12/15/20, 1 epoch)", "buckets": list(sampling.sampling_buckets(run)),
           "compute_dtype": str(run.config.model.compute_dtype),
           "graphs_per_seed": a.num, "seeds": a.seeds, "num_steps": a.num_steps,
           "per_seed_calls": {"wall_s": round(loop_s, 3),
                              "compile_s": round(sum(r["compile_seconds"] for r in loop), 3),
                              "sampling_s": round(sum(r["seconds"] for r in loop), 3)},
           "one_request": {"wall_s": round(merged_s, 3),
                           "compile_s": round(merged[0]["request"]["compile_seconds"], 3),
                           "sampling_s": round(merged[0]["request"]["seconds"], 3)},
           "same_graphs": all(np.array_equal(x["adj"], y["adj"]) for x, y in zip(loop, merged))}
    print(json.dumps(row, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(row, f, indent=1)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    if not row["same_graphs"] and row["compute_dtype"] == "float32":
        sys.exit("generate_seeds gave other graphs than one generate call per seed (float32)")


if __name__ == "__main__":
    main()
