"""The warp-specialized pair-MLP kernel under each schedule (``DDGJAX_PAIR_SCHEDULE``), on one GPU.

At the Planar-60 sampling shape (1024 graphs x 60 x 60 rows, 128 channels, bf16 input),
with bf16 outputs and with float8 outputs (what ``DDGJAX_FP8_PRODUCT=1`` writes), each
schedule of ``pallas_launch.PAIR_SCHEDULES`` (``pair_mlp_kernel.schedule_options``):
whether its outputs equal the ``plain`` schedule's bit for bit, and its time (the median
of ``--repeats`` calls, the schedules alternating over ``--rounds`` rounds; the row's
``ms`` is the median of the round medians).

    python benchmarks/pair_schedule.py --out OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median_ms(fn, args, repeats: int) -> float:
    import jax
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--graphs", type=int, default=1024)
    p.add_argument("--nodes", type=int, default=60)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    import jax
    import jax.numpy as jnp
    import numpy as np
    from ddgjax.models import pair_mlp_kernel, pair_mlp_mgpu, pallas_launch

    rows = a.graphs * a.nodes * a.nodes
    interpret = jax.default_backend() == "cpu"          # a smoke test only
    args = pair_mlp_mgpu.random_inputs(rows, seed=3)
    res = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
           "rows": rows, "rounds": a.rounds, "repeats": a.repeats, "variants": []}
    for name, odt in (("bf16", None), ("fp8", pair_mlp_mgpu.FP8)):
        fns = {}
        for sched in pallas_launch.PAIR_SCHEDULES:
            opts = pair_mlp_kernel.schedule_options(sched, odt)
            if any(opts == o for o, _ in fns.values()):
                continue                                  # the same kernel as another
            fns[sched] = (opts, jax.jit(lambda *v, o=opts: pair_mlp_mgpu.pair_mlps(
                *v, out_dtype=odt, warp_specialized=True, interpret=interpret, **o)))
        want = [np.asarray(m.astype(jnp.float32)) for m in fns["plain"][1](*args)]
        times = {s: [] for s in fns}
        equal = {}
        for s, (_, fn) in fns.items():
            got = [np.asarray(m.astype(jnp.float32)) for m in fn(*args)]
            equal[s] = all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want))
        for r in range(a.rounds):
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for s in order:
                times[s].append(median_ms(fns[s][1], args, a.repeats))
        for s, (opts, _) in fns.items():
            row = {"out": name, "schedule": s, **opts, "equal_to_plain": equal[s],
                   "ms": statistics.median(times[s]), "round_ms": times[s]}
            print(json.dumps(row), flush=True)
            res["variants"].append(row)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
