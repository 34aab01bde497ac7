"""Where the time of a PPGN forward pass / train step goes, kernel by kernel.

    python benchmarks/profile_ppgn.py --out OUT_DIR [--dtypes bfloat16,float32]
        [--sample_batch 1024] [--train_batch 64] [--option model.ppgn.KEY=VALUE ...]

For each dtype it profiles (``jax.profiler``) a few calls of

* ``sample_forward``: one denoiser call on ``sample_batch`` graphs (one sampling step's
  network work, N = 60, PPGN 8 x 128, random weights and graphs), and
* ``train_step``: one optimizer step at batch ``train_batch`` (``make_train_chunk`` of
  one step),

reads the trace back (``jax.profiler.ProfileData``), sums the device time of every
kernel by name, and writes ``OUT_DIR/profile_<what>_<dtype>.json`` (kernels sorted by
time, with their share) and the optimized HLO (``*.hlo.txt``) for reading off which
ops XLA fused. It also measures the two ceilings of METHOD.md on this card: a large
device-to-device copy (bytes read + written per second) and a bf16/f32 GEMM of the
shape the Dense layers have (``[B*N*N, 128] x [128, 128]``).
"""
import argparse
import collections
import glob
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bench_core import core_config, random_graphs, timeit  # noqa: E402
from ddgjax import training  # noqa: E402
from ddgjax.models import init_params, model_from_config  # noqa: E402
from ddgjax.parallel import make_mesh  # noqa: E402
from ddgjax.processes import process_from_config  # noqa: E402


def device_kernel_times(trace_dir):
    """Sum device-side event durations by name over all GPU planes: ``{name: [ns, count]}``."""
    files = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    totals = collections.defaultdict(lambda: [0.0, 0])
    lines_seen = collections.Counter()
    for path in files:
        data = jax.profiler.ProfileData.from_file(path)
        for plane in data.planes:
            if not plane.name.startswith("/device:"):
                continue
            for line in plane.lines:
                lines_seen[f"{plane.name}|{line.name}"] += 1
                if line.name not in ("Kernels", "Activity", "XLA Ops", "Stream #"):
                    if not line.name.startswith("Stream"):
                        continue
                for ev in line.events:
                    key = f"{line.name.split('#')[0].strip()}::{ev.name}"
                    totals[key][0] += ev.duration_ns
                    totals[key][1] += 1
    return dict(totals), dict(lines_seen)


def profile_fn(fn, args, calls, label, out_dir):
    jax.block_until_ready(fn(*args))  # compile + warm
    trace = tempfile.mkdtemp(prefix="trace_")
    jax.profiler.start_trace(trace)
    t0 = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    wall = (time.perf_counter() - t0) / calls
    jax.profiler.stop_trace()
    totals, lines = device_kernel_times(trace)
    shutil.rmtree(trace, ignore_errors=True)
    rows = sorted(({"name": k, "ms_per_call": v[0] / 1e6 / calls, "count_per_call": v[1] / calls}
                   for k, v in totals.items()), key=lambda r: -r["ms_per_call"])
    by_line = collections.defaultdict(float)
    for r in rows:
        by_line[r["name"].split("::")[0]] += r["ms_per_call"]
    for r in rows:
        r["share_of_line"] = r["ms_per_call"] / max(by_line[r["name"].split("::")[0]], 1e-12)
    result = {"what": label, "wall_ms_per_call": 1e3 * wall, "device_ms_per_call_by_line": by_line,
              "lines": lines, "kernels": rows[:200]}
    with open(os.path.join(out_dir, f"profile_{label}.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\n== {label}: wall {1e3 * wall:.2f} ms/call; device by line "
          + ", ".join(f"{k} {v:.2f} ms" for k, v in by_line.items()))
    for r in rows[:25]:
        print(f"  {r['ms_per_call']:8.3f} ms  x{r['count_per_call']:5.1f}  {r['name'][:110]}")
    return result


def ceilings(out_dir):
    res = {}
    x = jax.random.normal(jax.random.key(0), (512 * 1024 * 1024 // 4,), jnp.float32)  # 512 MiB
    copy = jax.jit(lambda a: a * 1.0001)
    med, _ = timeit(copy, x, repeat=10)
    res["copy_TBps_read_plus_write"] = 2 * x.nbytes / med / 1e12
    for dt in (jnp.bfloat16, jnp.float32):
        a = jax.random.normal(jax.random.key(1), (1024 * 3600, 128), dt)
        w = jax.random.normal(jax.random.key(2), (128, 128), dt)
        mm = jax.jit(lambda a, w: a @ w)
        med, _ = timeit(mm, a, w, repeat=10)
        flops = 2 * a.shape[0] * 128 * 128
        res[f"dense_3.7Mx128x128_{jnp.dtype(dt).name}_ms"] = 1e3 * med
        res[f"dense_3.7Mx128x128_{jnp.dtype(dt).name}_TFLOPs"] = flops / med / 1e12
        res[f"dense_3.7Mx128x128_{jnp.dtype(dt).name}_TBps"] = 2 * a.nbytes / med / 1e12
        big = jax.random.normal(jax.random.key(3), (8192, 8192), dt)
        med, _ = timeit(jax.jit(lambda a: a @ a), big, repeat=5)
        res[f"gemm_8192_{jnp.dtype(dt).name}_TFLOPs"] = 2 * 8192 ** 3 / med / 1e12
    print("ceilings:", json.dumps(res, indent=1))
    with open(os.path.join(out_dir, "ceilings.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--sample_batch", type=int, default=1024)
    ap.add_argument("--train_batch", type=int, default=64)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--tag", default="")
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=KEY=VALUE[,KEY=VALUE]: profile this variant too (tag _NAME)")
    ap.add_argument("--skip_ceilings", action="store_true")
    ap.add_argument("--skip_train", action="store_true")
    ap.add_argument("--sample_steps", type=int, default=0,
                    help="also time a whole Algorithm-2 sampling run of this many steps")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print("device:", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    if not args.skip_ceilings:
        ceilings(args.out)
    N = args.nodes
    variants = [(args.tag, args.option)]
    for item in args.variant:
        name, opts = item.split("=", 1)
        variants.append((f"{args.tag}_{name}", args.option + [o for o in opts.split(",") if o]))
    summary = []
    for dtype in args.dtypes.split(","):
        for vtag, options in variants:
            summary.append(profile_variant(args, dtype, vtag, options, N))
    print("\nsummary:")
    for row in summary:
        print("  " + json.dumps(row))
    with open(os.path.join(args.out, f"summary{args.tag}.json"), "w") as f:
        json.dump(summary, f, indent=1)


def full_sampling_seconds(model, params, num, N, steps, repeat=3):
    """Median seconds of one whole jitted Algorithm-2 sampling of ``num`` graphs."""
    from ddgjax.processes import BitFlipProcess
    from ddgjax.graphs import node_mask_from_counts
    process = BitFlipProcess(schedule_name="linear", num_timesteps=steps, algorithm=2)
    sampler = process.sampler(steps, algorithm=2)
    mask = jnp.asarray(node_mask_from_counts(np.full(num, N), N))
    keys = jax.random.split(jax.random.key(0), num)
    fn = lambda a, m, t, s, *est: model.apply(params, a, m, t, s, *est)
    run = jax.jit(lambda k, m: sampler(fn, k, m))
    med, best = timeit(run, keys, mask, warmup=1, repeat=repeat)
    return med


def profile_variant(args, dtype, vtag, options, N):
    cfg = core_config(dtype, args.hidden, args.blocks, options=options)
    model = model_from_config(cfg)
    tag = f"{dtype}{vtag}"
    row = {"variant": tag, "options": options}
    # one sampling step's network work
    params = init_params(model, jax.random.key(0), N)
    adj, mask = random_graphs(args.sample_batch, N, p=0.5)
    t_index = jnp.full((args.sample_batch,), 16, jnp.int32)
    level = jnp.full((args.sample_batch,), 0.25, jnp.float32)
    fwd = jax.jit(lambda p, a, m, t, s: model.apply(p, a, m, t, s))
    fargs = (params, jnp.asarray(adj), jnp.asarray(mask), t_index, level)
    with open(os.path.join(args.out, f"sample_forward_{tag}.hlo.txt"), "w") as f:
        f.write(fwd.lower(*fargs).compile().as_text())
    res = profile_fn(fwd, fargs, args.calls, f"sample_forward_{tag}", args.out)
    row["sample_forward_ms"] = sum(res["device_ms_per_call_by_line"].values())
    ref_cfg = core_config("float32", args.hidden, args.blocks,
                          options=[o for o in options if "pallas" not in o
                                   and "fused" not in o])
    ref = jax.jit(lambda p, a, m, t, s: model_from_config(ref_cfg).apply(p, a, m, t, s))
    small = tuple(a[:64] if getattr(a, "ndim", 0) else a for a in fargs[1:])
    out, want = fwd(params, *small), ref(params, *small)
    row["rel_err_vs_f32_reference"] = float(jnp.linalg.norm(out - want)
                                            / jnp.linalg.norm(want))
    if args.sample_steps:
        row["sample_full_s"] = full_sampling_seconds(model, params, args.sample_batch, N,
                                                     args.sample_steps)
    if args.skip_train:
        print(json.dumps(row), flush=True)
        return row
    # one train step
    process = process_from_config(cfg)
    tx = training.make_optimizer(cfg.train, 1)
    state = training.init_state(model, tx, jax.random.key(0), N)
    B = args.train_batch
    adj, mask = random_graphs(B, N)
    adj = np.concatenate([adj, adj[:1] * 0])
    mask = np.concatenate([mask, mask[:1] & False])
    chunk = training.make_train_chunk(model, tx, process, make_mesh(jax.devices()[:1]),
                                      jax.random.key(1), flat=bool(cfg.train.flat_update))
    idx = np.tile(np.arange(B, dtype=np.int32), (1, 1))
    targs = (state, adj, mask, idx)
    with open(os.path.join(args.out, f"train_step_{tag}.hlo.txt"), "w") as f:
        f.write(chunk.lower(*targs).compile().as_text())
    res = profile_fn(chunk, targs, args.calls, f"train_step_{tag}", args.out)
    row["train_step_device_ms"] = sum(res["device_ms_per_call_by_line"].values())
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    main()
