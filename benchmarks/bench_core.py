"""GPU benchmark of the core: PPGN train step and full sampling.

    python benchmarks/bench_core.py --out bench_core.json

1. One PPGN training step (forward + backward + Adam), 8 blocks x 128 hidden,
   N = 60, batch 64, float32 and bfloat16 compute.
2. One full 32-step sampling of 1024 graphs with N = 60 (Algorithm 2), float32
   and bfloat16, with the vmapped per-graph sampler and the natively batched one.

Median of repeated timed calls after a warm-up, each ended by
``block_until_ready``. Inputs are random graphs (never zeros).
"""
import argparse
import ast
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ddgjax import training  # noqa: E402
from ddgjax.graphs import GraphBatch, node_mask_from_counts, pair_mask  # noqa: E402
from ddgjax.models import init_params, model_from_config  # noqa: E402
from ddgjax.parallel import make_mesh  # noqa: E402
from ddgjax.processes import bitflip, process_from_config  # noqa: E402
from ddgjax.sampling import compiled_sampler  # noqa: E402
from configs import default  # noqa: E402


def timeit_detail(fn, *args, warmup=2, repeat=10) -> dict:
    """Time ``fn(*args)`` (each call ended by ``block_until_ready``): the first call
    alone (compile + run), then the rest of the warm-up, then ``repeat`` timed calls."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    for _ in range(warmup - 1):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return {"first_call_s": first, "median_s": float(np.median(times)),
            "min_s": float(np.min(times)), "times_s": times}


def timeit(fn, *args, warmup=2, repeat=10):
    d = timeit_detail(fn, *args, warmup=warmup, repeat=repeat)
    return d["median_s"], d["min_s"]


def _parse_like(old, raw: str, key: str):
    if isinstance(old, bool):
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"{key}: expected true or false, got {raw!r}")
    if isinstance(old, int):
        return int(raw)
    if isinstance(old, float):
        return float(raw)
    if isinstance(old, str):
        return raw
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def apply_options(cfg, options=()):
    """Set ``key=value`` overrides (``model.ppgn.remat=true``) on ``cfg`` in place, each value
    parsed with the type of the key's current value. A ``model.ppgn.*`` key that the config
    lacks but the PPGN has as a field is added (value read as a Python literal, else a
    string). ValueError for anything else."""
    from ddgjax.models import model_fields
    for opt in options:
        key, sep, raw = opt.partition("=")
        if not sep:
            raise ValueError(f"option {opt!r}: expected key=value")
        parts = key.split(".")
        node = cfg
        for part in parts[:-1]:
            if part not in node:
                raise ValueError(f"option {opt!r}: the config has no {part!r} (in {key})")
            node = node[part]
        leaf = parts[-1]
        if leaf in node:
            node[leaf] = _parse_like(node[leaf], raw, key)
        elif parts[:-1] == ["model", "ppgn"] and leaf in model_fields("ppgn"):
            node[leaf] = _parse_like(None, raw, key)
        else:
            raise ValueError(f"option {opt!r}: no such key; valid here: {sorted(node.keys())}")
    return cfg


def core_config(dtype, hidden=128, blocks=8, T=32, options=()):
    """The default config with PPGN ``blocks x hidden``, ``compute_dtype``, T levels and the
    ``key=value`` overrides (``apply_options``)."""
    cfg = default.get_config()
    cfg.model.ppgn.hidden, cfg.model.ppgn.num_blocks = hidden, blocks
    cfg.model.compute_dtype = dtype
    cfg.diffusion.num_timesteps = T
    return apply_options(cfg, options)


def random_graphs(B, N, seed=0, p=0.1, nodes=None):
    """``B`` random graphs of ``nodes`` real nodes (default ``N``) padded to ``N``."""
    rng = np.random.default_rng(seed)
    mask = node_mask_from_counts(np.full(B, N if nodes is None else nodes), N)
    u = np.triu(rng.random((B, N, N)) < p, 1) & pair_mask(mask)
    return (u | u.transpose(0, 2, 1)).astype(np.float32), mask


def bench_train_step(dtype, B=64, N=60, hidden=128, blocks=8, steps=10, options=(),
                     repeat=5, warmup=2, nodes=None):
    """``nodes``: real nodes per graph (default ``N``), padded to ``N``."""
    cfg = core_config(dtype, hidden, blocks, options=options)
    model = model_from_config(cfg)
    process = process_from_config(cfg)  # the default config: bit flips, linear, T = 32, L_simple
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), N)
    adj, mask = random_graphs(B, N, nodes=nodes)
    adj = np.concatenate([adj, adj[:1] * 0])
    mask = np.concatenate([mask, mask[:1] & False])
    mesh = make_mesh(jax.devices()[:1])
    chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1))
    idx = np.tile(np.arange(B, dtype=np.int32), (steps, 1))
    data = GraphBatch(adj, mask)
    t = timeit_detail(lambda s: chunk(s, data, idx), state, warmup=warmup, repeat=repeat)
    real = "" if nodes is None else f" ({nodes} real nodes)"
    return {"what": f"PPGN {blocks}x{hidden} train step, N={N}{real}, B={B}, {dtype}",
            "ms_per_step": 1e3 * t["median_s"] / steps, "ms_per_step_min": 1e3 * t["min_s"] / steps,
            "steps_per_call": steps, "first_call_s": t["first_call_s"],
            "ms_per_step_all": [1e3 * x / steps for x in t["times_s"]], "options": list(options)}


def bench_sampling(dtype, num=1024, N=60, hidden=128, blocks=8, T=32, vmapped=True,
                   options=(), repeat=3, warmup=1, params_as_arg=False, nodes=None):
    """``params_as_arg``: pass the parameters to the jitted sampler as ``ddgjax.sampling``
    does (``compiled_sampler``) instead of closing over them (compile-time constants).
    ``nodes``: real nodes per graph (default ``N``), padded to ``N``."""
    cfg = core_config(dtype, hidden, blocks, T, options)
    model = model_from_config(cfg)
    params = init_params(model, jax.random.key(0), N)
    process = process_from_config(cfg)
    mask = jnp.asarray(node_mask_from_counts(np.full(num, N if nodes is None else nodes), N))
    if vmapped:  # the process's sampler: what ddgjax.sampling.generate runs
        sampler = process.sampler(T, algorithm=2)
        keys = jax.random.split(jax.random.key(0), num)
        if params_as_arg:
            fn = compiled_sampler(model, sampler)
            t = timeit_detail(fn, params, keys, mask, warmup=warmup, repeat=repeat)
        else:
            fn = lambda a, m, t, s: model.apply(params, a, m, t, s)
            run = jax.jit(lambda k, m: sampler(fn, k, m))
            t = timeit_detail(run, keys, mask, warmup=warmup, repeat=repeat)
    else:  # the same chain batched natively (one key for the whole batch)
        run = jax.jit(lambda p, k, m: bitflip.sample_graphs(
            lambda a, m_, t_, s: model.apply(p, a, m_, t_, s), k, m, process.schedule, 2))
        if params_as_arg:
            t = timeit_detail(run, params, jax.random.key(0), mask, warmup=warmup, repeat=repeat)
        else:
            t = timeit_detail(lambda k, m: run(params, k, m), jax.random.key(0), mask,
                              warmup=warmup, repeat=repeat)
    med, best = t["median_s"], t["min_s"]
    real = "" if nodes is None else f" ({nodes} real nodes)"
    return {"what": f"sample {num} graphs, PPGN {blocks}x{hidden}, N={N}{real}, {T} steps, "
                    f"{dtype}, {'vmapped per-graph' if vmapped else 'batched'}",
            "seconds": med, "seconds_min": best, "graphs_per_s": num / med,
            "first_call_s": t["first_call_s"], "seconds_all": t["times_s"],
            "options": list(options)}


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
