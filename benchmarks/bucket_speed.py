"""Training speed with size buckets against plain padding, on one GPU.

    python benchmarks/bucket_speed.py --dtypes bfloat16 --remat off --epochs 2 \
        --option model.ppgn.pad_multiple=1 --out bucket_speed.json
    python benchmarks/bucket_speed.py --out bucket_speed.json \
        [--config spectre_sbm] [--epochs 3] [--steps 5] [--dtypes bfloat16,float32] \
        [--remat off,on] [--modes buckets,plain] [--buckets 64,96,128,187] \
        [--option model.ppgn.hidden=8 ...]

For every (mode, compute dtype, remat) of the config (default ``spectre_sbm``: PPGN
8 x 128, batch 32, SPECTRE SBM, 44-187 nodes), it builds the training step exactly as
``ddgjax.training`` does (``make_train_chunk(weighted=True)``: one step per call, the
weight of the step's bucket) and measures:

* per shape (each bucket; ``plain``: the one shape at max_nodes = 187): compile time,
  XLA's memory analysis of the compiled step (arguments + outputs + temporaries - aliased:
  what the step needs on the device, ``compiled_need_bytes``), and ms per step (median of
  ``--steps`` timed calls on one fixed batch, after a warm-up call);
* per epoch: ``--epochs`` epochs of the real schedule (``buckets.
  bucket_epoch_batches``: every training graph once, buckets interleaved; plain: the
  same with one bucket holding every graph at max_nodes), all programs compiled
  beforehand; seconds per epoch (median) and the extrapolation to 5000 epochs;
* the device's peak memory so far (``memory_stats``, where the backend has it).

``plain`` is the run without buckets: ``ceil(G / B)`` steps of ``B`` graphs padded to
max_nodes. (Training without buckets scans a whole chunk of epochs in one call; the
per-step work is the same, the calls here add one dispatch per step.) A shape whose
compiled need exceeds the card's memory is reported and skipped. ``--option key=value``
overrides config keys (``bench_core.apply_options``), e.g. a tiny model for a CPU smoke
test: ``--option model.ppgn.hidden=8 --option model.ppgn.num_blocks=2``.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench_core import apply_options  # noqa: E402
from ddgjax import buckets, input_pipeline, training  # noqa: E402
from ddgjax.configuration import get_config  # noqa: E402
from ddgjax.data import node_count_distribution  # noqa: E402
from ddgjax.models import model_from_config  # noqa: E402
from ddgjax.parallel import batch_sharded, make_mesh, put_global, replicate  # noqa: E402
from ddgjax.processes import fit_to_data, process_from_config  # noqa: E402


def memory_row(compiled) -> dict:
    ma = compiled.memory_analysis()
    if ma is None:
        return {}
    need = (ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
            - ma.alias_size_in_bytes)
    return {"argument_bytes": int(ma.argument_size_in_bytes),
            "output_bytes": int(ma.output_size_in_bytes),
            "temp_bytes": int(ma.temp_size_in_bytes), "alias_bytes": int(ma.alias_size_in_bytes),
            "compiled_need_bytes": int(need), "compiled_need_gb": need / 1e9}


def capacity_bytes():
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("bytes_limit")


def peak_bytes():
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def measure(cfg, mode: str, args) -> dict:
    """One (mode, dtype, remat) row: per-shape compile/memory/ms, then epochs."""
    ds, data, max_nodes = input_pipeline.load_training_data(cfg)
    cfg = fit_to_data(cfg, data.adj, data.node_mask)
    model, process = model_from_config(cfg), process_from_config(cfg)
    mesh = make_mesh(jax.devices()[:1])
    B = cfg.train.batch_size
    if mode == "buckets":
        bounds = buckets.bucket_bounds(args.buckets or cfg.data.buckets,
                                              node_count_distribution(ds.train), max_nodes)
        if not bounds:
            raise SystemExit("--modes buckets: the config has no config.data.buckets; pass "
                             "--buckets")
        plan = buckets.plan_buckets(data.num_nodes, bounds, B, max_nodes)
    else:  # plain padding: one bucket of every graph at max_nodes, batch B, weight 1
        n = len(ds.train)
        steps = input_pipeline.steps_per_epoch(n, B)
        plan = buckets.BucketPlan((max_nodes,), (np.arange(n, dtype=np.int32),), (B,),
                                         (steps,), (1.0,), (0.0,))
    tx = training.make_optimizer(cfg.train, plan.steps_per_epoch)
    state = replicate(training.init_state(model, tx, jax.random.key(0), max_nodes), mesh)
    chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1),
                                      cfg.train.ema_decay, weighted=True)
    device_data = [replicate(d, mesh) for d in buckets.bucket_data(data, plan)]
    sharding = batch_sharded(mesh, 1)
    capacity = capacity_bytes()
    row = {"mode": mode, "compute_dtype": cfg.model.compute_dtype,
           "remat": bool(cfg.model.ppgn.remat), "kernels": cfg.model.ppgn.get("kernels", "xla"),
           "batch_size": B, "max_nodes": int(max_nodes), "num_graphs": len(ds.train),
           "steps_per_epoch": plan.steps_per_epoch, "shapes": []}
    compiled, ok = [], True
    for b, d in enumerate(device_data):
        bsz = plan.batch_sizes[b]
        idx = put_global(np.full((1, bsz), 0, np.int32) + np.arange(bsz, dtype=np.int32)
                         % len(plan.members[b]), sharding)
        w = replicate(np.ones((1,), np.float32), mesh)
        shape = {"nodes": plan.sizes[b], "graphs": len(plan.members[b]), "batch": bsz,
                 "steps_per_epoch": plan.steps[b], "weight": plan.weights[b]}
        t0 = time.perf_counter()
        fn = chunk.lower(state, d, idx, w).compile()
        shape["compile_s"] = time.perf_counter() - t0
        shape.update(memory_row(fn))
        compiled.append(fn)
        row["shapes"].append(shape)
        if capacity and shape.get("compiled_need_bytes", 0) > 0.95 * capacity:
            shape["skipped"] = "compiled need exceeds the device's memory"
            ok = False
            continue
        try:
            st, _ = fn(state, d, idx, w)
            jax.block_until_ready(st)
            times = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                st, loss = fn(st, d.adj, d.node_mask, idx, w)
                jax.block_until_ready(loss)
                times.append(time.perf_counter() - t0)
            shape["ms_per_step"] = 1e3 * float(np.median(times))
            shape["ms_per_graph"] = shape["ms_per_step"] / bsz
            del st
        except Exception as e:  # out of memory at run time
            shape["error"] = str(e).splitlines()[0][:300]
            ok = False
    row["compile_s"] = sum(s["compile_s"] for s in row["shapes"])
    if ok:
        epoch_s = []
        st = state
        for e in range(args.epochs):
            order, batches, weights = buckets.bucket_epoch_batches(plan, 0, e)
            t0 = time.perf_counter()
            for b, idx, wt in zip(order, batches, weights):
                d = device_data[b]
                st, loss = compiled[b](st, d.adj, d.node_mask, put_global(idx[None], sharding),
                                       replicate(wt[None], mesh))
            jax.block_until_ready(st)
            epoch_s.append(time.perf_counter() - t0)
            if not np.isfinite(float(np.asarray(loss)[0])):
                row["warning"] = "non-finite loss"
        row["epoch_s"] = epoch_s
        row["epoch_s_median"] = float(np.median(epoch_s))
        row["minutes_for_5000_epochs"] = row["epoch_s_median"] * 5000 / 60
    row["peak_bytes_in_use_so_far"] = peak_bytes()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="spectre_sbm")
    ap.add_argument("--out", default="")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per shape")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--remat", default="off,on")
    ap.add_argument("--modes", default="buckets,plain")
    ap.add_argument("--buckets", default="", help="override config.data.buckets")
    ap.add_argument("--option", action="append", default=[])
    args = ap.parse_args()
    rows = []
    info = {"config": args.config, "options": args.option, "device": str(jax.devices()[0]),
            "device_kind": jax.devices()[0].device_kind, "backend": jax.default_backend(),
            "jax": jax.__version__, "epochs": args.epochs, "steps": args.steps}
    print(json.dumps(info), flush=True)
    for dtype in args.dtypes.split(","):
        for remat in args.remat.split(","):
            for mode in args.modes.split(","):
                cfg = get_config(args.config)
                cfg.model.compute_dtype = dtype
                cfg.model.ppgn.remat = remat == "on"
                apply_options(cfg, args.option)
                t0 = time.perf_counter()
                row = measure(cfg, mode, args)
                row["wall_s"] = time.perf_counter() - t0
                rows.append(row)
                brief = {k: row.get(k) for k in ("mode", "compute_dtype", "remat", "compile_s",
                                                 "steps_per_epoch", "epoch_s_median")}
                brief["shapes"] = [(s["nodes"], s["batch"], round(s.get("ms_per_step", -1), 2),
                                    round(s.get("compiled_need_gb", -1), 3))
                                   for s in row["shapes"]]
                print(json.dumps(brief), flush=True)
                jax.clear_caches()
    # speed-up of buckets over plain padding per (dtype, remat)
    speedups = []
    for r in rows:
        if r["mode"] != "buckets" or "epoch_s_median" not in r:
            continue
        for p in rows:
            if (p["mode"] == "plain" and p["compute_dtype"] == r["compute_dtype"]
                    and p["remat"] == r["remat"] and "epoch_s_median" in p):
                speedups.append({"compute_dtype": r["compute_dtype"], "remat": r["remat"],
                                 "plain_epoch_s": p["epoch_s_median"],
                                 "buckets_epoch_s": r["epoch_s_median"],
                                 "speedup": p["epoch_s_median"] / r["epoch_s_median"]})
    out = {**info, "rows": rows, "speedups": speedups}
    for s in speedups:
        print(json.dumps(s), flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
