"""GPU benchmark of the core: PPGN train step and full sampling.

    python benchmarks/bench_core.py --out docs/bench_core.json

1. One PPGN training step (forward + backward + Adam), 8 blocks x 128 hidden,
   N = 60, batch 64, float32 and bfloat16 compute.
2. One full 32-step sampling of 1024 graphs with N = 60 (Algorithm 2), float32
   and bfloat16, with the vmapped per-graph sampler and the natively batched one.

Median of repeated timed calls after a warm-up, each ended by
``block_until_ready``. Inputs are random graphs (never zeros).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ddgjax import training  # noqa: E402
from ddgjax.graphs import node_mask_from_counts, pair_mask  # noqa: E402
from ddgjax.models import build_model, init_params, model_from_config  # noqa: E402
from ddgjax.parallel import make_mesh  # noqa: E402
from ddgjax.processes import BitFlipProcess, bitflip, process_from_config  # noqa: E402
from configs import default  # noqa: E402


def timeit(fn, *args, warmup=2, repeat=10):
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(np.min(times))


def random_graphs(B, N, seed=0, p=0.1):
    rng = np.random.default_rng(seed)
    mask = node_mask_from_counts(np.full(B, N), N)
    u = np.triu(rng.random((B, N, N)) < p, 1) & pair_mask(mask)
    return (u | u.transpose(0, 2, 1)).astype(np.float32), mask


def bench_train_step(dtype, B=64, N=60, hidden=128, blocks=8, steps=10):
    cfg = default.get_config()
    cfg.model.ppgn.hidden, cfg.model.ppgn.num_blocks = hidden, blocks
    cfg.model.compute_dtype = dtype
    model = model_from_config(cfg)
    process = process_from_config(cfg)  # the default config: bit flips, linear, T = 32, L_simple
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), N)
    adj, mask = random_graphs(B, N)
    adj = np.concatenate([adj, adj[:1] * 0])
    mask = np.concatenate([mask, mask[:1] & False])
    mesh = make_mesh(jax.devices()[:1])
    chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1))
    idx = np.tile(np.arange(B, dtype=np.int32), (steps, 1))
    med, best = timeit(lambda s: chunk(s, adj, mask, idx), state, repeat=5)
    return {"what": f"PPGN {blocks}x{hidden} train step, N={N}, B={B}, {dtype}",
            "ms_per_step": 1e3 * med / steps, "ms_per_step_min": 1e3 * best / steps}


def bench_sampling(dtype, num=1024, N=60, hidden=128, blocks=8, T=32, vmapped=True):
    model = build_model("ppgn", T, hidden=hidden, num_blocks=blocks,
                        compute_dtype=jnp.bfloat16 if dtype == "bfloat16" else jnp.float32)
    params = init_params(model, jax.random.key(0), N)
    process = BitFlipProcess(schedule_name="linear", num_timesteps=T, algorithm=2)
    mask = jnp.asarray(node_mask_from_counts(np.full(num, N), N))
    fn = lambda a, m, t, s: model.apply(params, a, m, t, s)
    if vmapped:  # the process's sampler: what ddgjax.sampling.generate runs
        sampler = process.sampler(T, algorithm=2)
        keys = jax.random.split(jax.random.key(0), num)
        run = jax.jit(lambda k, m: sampler(fn, k, m))
        med, best = timeit(run, keys, mask, warmup=1, repeat=3)
    else:  # the same chain batched natively (one key for the whole batch)
        run = jax.jit(lambda k, m: bitflip.sample_graphs(fn, k, m, process.schedule, 2))
        med, best = timeit(run, jax.random.key(0), mask, warmup=1, repeat=3)
    return {"what": f"sample {num} graphs, PPGN {blocks}x{hidden}, N={N}, {T} steps, {dtype}, "
                    f"{'vmapped per-graph' if vmapped else 'batched'}",
            "seconds": med, "seconds_min": best, "graphs_per_s": num / med}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    results = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
               "rows": []}
    for dtype in ("float32", "bfloat16"):
        results["rows"].append(bench_train_step(dtype))
        print(results["rows"][-1], flush=True)
    for dtype in ("float32", "bfloat16"):
        for vm in (True, False):
            results["rows"].append(bench_sampling(dtype, vmapped=vm))
            print(results["rows"][-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
