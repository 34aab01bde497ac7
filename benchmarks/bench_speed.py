"""Peer benchmark: the same PPGN in ddgjax and in PyTorch (eager and ``torch.compile``).

    python benchmarks/bench_speed.py --tf32 on --no_batched --repeat_sample 2 --repeat_train 3 \
        --ddgjax_option model.ppgn.kernels=pallas --out bench_speed.json
    python benchmarks/bench_speed.py --quick --out /tmp/bench_speed_quick.json   # CPU smoke test

Two rows, each in float32 and bfloat16, on one device in one process:

* ``sample_planar60_1024_T32``: sample 1024 graphs with N = 60 in 32 steps of Algorithm 2
  (per step: logits = PPGN(A_t, beta_bar_t); A_0 ~ Bernoulli(sigmoid(logits)) on the
  upper triangle, symmetrised; A_{t-1} = A_0 with each pair flipped with probability
  beta_bar_{t-1}), from A_T ~ ER(1/2). PPGN 8 blocks x 128 channels, random weights.
* ``train_step_planar60_bs64``: one training step on 64 random graphs with N = 60: L_simple
  (per graph t ~ U{1..32}, A_t = A_0 with pairs flipped with probability beta_bar_t,
  BCE(logits, A_0) on the real upper pairs weighted by 1 - 2 beta_bar_t + 1/T), backward,
  Adam. Timed as chunks of ``--steps`` steps (ddgjax: one jitted ``lax.scan`` over them,
  ``training.make_train_chunk``; torch: a Python loop), per-step time = chunk time / steps.

ddgjax: ``benchmarks/bench_core.py``'s timing (train chunk; for sampling both the vmapped
per-graph sampler that ``ddgjax.sampling.generate`` runs, params passed as an argument as
there, and the natively batched chain). bfloat16 is ``config.model.compute_dtype``.
PyTorch: ``benchmarks/torch_ppgn.py``, with the ddgjax model's initial parameters copied
in (the same weights on both sides); bfloat16 is ``torch.autocast``. ``torch.compile``
compiles the whole sampling step (model and draws) and the loss (forward; AOTAutograd
compiles its backward); Adam is ``fused=True`` on CUDA. Compile time is excluded from the
medians and reported as ``compile_s`` (first call minus median).

float32 matmul precision: JAX's default on GPU lets float32 dots use TF32 tensor cores
(docs.jax.dev, "Matmul precision"); the main torch columns match that
(``torch.set_float32_matmul_precision("high")``). With ``--tf32 both`` (the default) the
float32 rows also carry ``*_notf32`` torch columns (``"highest"``) and ``ddgjax_highest``
(``jax.default_matmul_precision("highest")``), the like-for-like full-float32 pair.

Before timing, a float32 check copies the ddgjax parameters into the torch model and
compares logits on random padded graphs at full precision (``check`` in the JSON).

Each measurement: warm-up, then the median (and min) of ``--repeat`` calls, each ended by
``block_until_ready`` / ``torch.cuda.synchronize``. Inputs are random graphs, never zeros.
The JSON is rewritten after every measurement, so an interrupted run leaves what it had.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX and torch share the card

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import bench_core  # noqa: E402
from ddgjax.models import init_params, model_from_config  # noqa: E402
from ddgjax.processes import bitflip  # noqa: E402
from ddgjax.processes.bitflip import make_schedule  # noqa: E402

try:
    import torch  # noqa: E402
    from benchmarks import torch_ppgn  # noqa: E402
except ImportError:  # the ddgjax columns still run
    torch = None


def torch_sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def torch_time(fn, device, warmup, repeat) -> dict:
    """Like ``bench_core.timeit_detail`` for torch: first call (compiles) alone, the rest
    of the warm-up, then ``repeat`` calls, each ended by a device sync."""
    t0 = time.perf_counter()
    fn()
    torch_sync(device)
    first = time.perf_counter() - t0
    for _ in range(warmup - 1):
        fn()
        torch_sync(device)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        torch_sync(device)
        times.append(time.perf_counter() - t0)
    return {"first_call_s": first, "median_s": float(np.median(times)),
            "min_s": float(np.min(times)), "times_s": times}


def set_tf32(on: bool):
    torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cudnn.allow_tf32 = on


def ddgjax_params(args, N):
    """The parameters bench_core's ddgjax runs start from (``init_params`` with key 0)."""
    cfg = bench_core.core_config("float32", args.hidden, args.blocks, args.T)
    return init_params(model_from_config(cfg), jax.random.key(0), N)


def torch_model(args, params, layout, device):
    m = torch_ppgn.TorchPPGN(args.hidden, args.blocks, "linear", layout)
    return torch_ppgn.load_ddgjax_params(m, params).to(device)


def compile_fn(fn, args):
    torch._dynamo.reset()
    return torch.compile(fn, mode=args.torch_compile_mode)


# ----------------------------------------------------------------------------
# Measurements: each returns a timing dict (bench_core.timeit_detail's keys)


def jax_sampling(args, dtype, vmapped, options=(), precision=None):
    with jax.default_matmul_precision(precision):
        r = bench_core.bench_sampling(dtype, args.num_graphs, args.N, args.hidden, args.blocks,
                                      args.T, vmapped=vmapped, options=options,
                                      repeat=args.repeat_sample, warmup=1, params_as_arg=True)
    return {"median_s": r["seconds"], "min_s": r["seconds_min"], "times_s": r["seconds_all"],
            "first_call_s": r["first_call_s"], "what": r["what"]}


def jax_train(args, dtype, options=(), precision=None):
    with jax.default_matmul_precision(precision):
        r = bench_core.bench_train_step(dtype, args.batch, args.N, args.hidden, args.blocks,
                                        args.steps, options=options, repeat=args.repeat_train)
    return {"median_s": r["ms_per_step"] / 1e3 * args.steps, "min_s": r["ms_per_step_min"] / 1e3
            * args.steps, "times_s": [x / 1e3 * args.steps for x in r["ms_per_step_all"]],
            "first_call_s": r["first_call_s"], "what": r["what"]}


def torch_sampling(args, dtype, compiled, layout, params, device):
    model = torch_model(args, params, layout, device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    ac = torch.bfloat16 if dtype == "bfloat16" else None
    T = args.T
    bb = torch.tensor(bitflip.sampling_grid(make_schedule("linear", T), T)[1], dtype=torch.float32,
                      device=device)
    mask = torch.ones(args.num_graphs, args.N, dtype=torch.bool, device=device)
    step = compile_fn(torch_ppgn.sample_step, args) if compiled else torch_ppgn.sample_step
    torch.manual_seed(0)

    def run():
        with torch.inference_mode():
            return torch_ppgn.sample_graphs(step, model, mask, bb, ac)

    return torch_time(run, device, warmup=1 if not compiled else 2, repeat=args.repeat_sample)


def torch_train(args, dtype, compiled, layout, params, device):
    model = torch_model(args, params, layout, device).train()
    opt = torch_ppgn.make_adam(model)
    ac = torch.bfloat16 if dtype == "bfloat16" else None
    adj, mask = bench_core.random_graphs(args.batch, args.N)
    adj = torch.from_numpy(adj).to(device)
    mask = torch.from_numpy(np.asarray(mask)).to(device)
    table = torch.tensor(make_schedule("linear", args.T).beta_bar, device=device)
    loss_fn = compile_fn(torch_ppgn.simple_loss, args) if compiled else torch_ppgn.simple_loss
    torch.manual_seed(0)

    def chunk():
        for _ in range(args.steps):
            torch_ppgn.train_step(loss_fn, model, opt, adj, mask, table, ac)

    return torch_time(chunk, device, warmup=2, repeat=args.repeat_train)


# ----------------------------------------------------------------------------


def check_same_function(args, device):
    """float32 logits of ddgjax's PPGN and the torch peer with copied parameters, on random
    padded graphs (N up to ``args.N``, counts >= 8 or so, edge density 0.3), both layouts."""
    N = args.N
    counts = sorted({N, max(4, (3 * N) // 4), max(4, N // 2), max(4, N // 3), max(4, N // 6)},
                    reverse=True)
    counts = (counts * 2)[:8]
    params = ddgjax_params(args, N)
    out = {}
    for layout in args.torch_layouts:
        out[layout] = torch_ppgn.compare_with_ddgjax(
            args.hidden, args.blocks, "linear", layout, counts, N, seed=0, device=str(device),
            ddgjax_params=params)
    worst = max(r["rel_err"] for r in out.values())
    return {"by_layout": out, "max_rel_err": worst, "threshold": 1e-4, "passed": worst < 1e-4,
            "max_grad_rel_err": max(r["grad_rel_err"] for r in out.values()),
            "grad_note": "informational (no threshold): at depth 8 some random batches show "
                         "1-4 % gradient differences for one parameter, unexplained",
            "precision": "float32; JAX default_matmul_precision('highest'), torch TF32 off"}


def bf16_agreement(args, device):
    """How far bfloat16 logits (ddgjax compute_dtype, torch autocast) are from the float32
    ones, on the check's graphs: informational, each side against its own float32 output."""
    import jax as _jax
    N = args.N
    params = ddgjax_params(args, N)
    adj, mask, noise = torch_ppgn.random_batch([N] * 4, N, seed=3)
    res = {}
    for dtype in ("float32", "bfloat16"):
        cfg = bench_core.core_config(dtype, args.hidden, args.blocks, args.T)
        model = model_from_config(cfg)
        res[f"ddgjax_{dtype}"] = np.asarray(_jax.jit(model.apply)(
            params, adj, mask, jnp.ones(len(adj), jnp.int32), noise))
        tm = torch_model(args, params, args.torch_layouts[0], device)
        a, m, s = (torch.from_numpy(x).to(device) for x in (adj, mask, noise))
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16,
                                             enabled=dtype == "bfloat16"):
            res[f"torch_{dtype}"] = tm(a, m, s).float().cpu().numpy()
    rel = lambda x, y: float(np.max(np.abs(x - y)) / np.max(np.abs(y)))
    return {"ddgjax_bf16_vs_f32": rel(res["ddgjax_bfloat16"], res["ddgjax_float32"]),
            "torch_bf16_vs_f32": rel(res["torch_bfloat16"], res["torch_float32"]),
            "torch_f32_vs_ddgjax_f32_default_precision": rel(res["torch_float32"],
                                                             res["ddgjax_float32"])}


COLUMNS = {
    "ddgjax": "ddgjax, default config: sampling = the vmapped per-graph Algorithm-2 sampler "
              "that ddgjax.sampling.generate runs (jitted, params as argument); train = "
              "training.make_train_chunk (lax.scan over the steps of one call)",
    "ddgjax_batched": "ddgjax sampling, the same chain natively batched (bitflip.sample_graphs "
                      "with one key for the batch), the arithmetic the torch sampler does",
    "ddgjax_variant": "ddgjax with the --ddgjax_option overrides (meta.ddgjax_option)",
    "ddgjax_highest": "float32 rows: ddgjax under jax.default_matmul_precision('highest')",
    "torch_eager": "PyTorch eager; float32 with TF32 matmuls (like JAX's GPU default); "
                   "bfloat16 = autocast",
    "torch_compile": "the same under torch.compile (meta.torch_compile_mode), compile time "
                     "excluded (torch_compile_time_s / detail.*.compile_s)",
    "*_notf32": "float32 rows: torch with set_float32_matmul_precision('highest')",
    "torch_<layout>_*": "the torch columns for a further --torch_layouts entry",
    "units": "sample rows: seconds per full sampling call (all graphs, all steps); train rows: "
             "milliseconds per optimizer step; medians, min/all in detail",
}


def row_name(kind, args):
    if kind == "sample":
        return f"sample_planar{args.N}_{args.num_graphs}_T{args.T}"
    return f"train_step_planar{args.N}_bs{args.batch}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench_speed.json")
    ap.add_argument("--rows", default="sample,train")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--num_graphs", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--N", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--T", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10, help="train steps per timed call")
    ap.add_argument("--repeat_sample", type=int, default=3)
    ap.add_argument("--repeat_train", type=int, default=5)
    ap.add_argument("--skip_torch", action="store_true")
    ap.add_argument("--skip_torch_compile", action="store_true")
    ap.add_argument("--torch_compile_mode", default="default",
                    help="torch.compile mode (default, max-autotune-no-cudagraphs, ...)")
    ap.add_argument("--torch_layouts", default="cl",
                    help="torch model layouts, comma-separated (cl, cf); the first gives the "
                         "torch_* columns, the others torch_<layout>_* columns")
    ap.add_argument("--tf32", choices=("both", "on"), default="both",
                    help="float32 rows: 'on' times torch with TF32 (JAX's default); 'both' "
                         "also torch without TF32 and ddgjax at 'highest' precision")
    ap.add_argument("--no_batched", action="store_true",
                    help="skip ddgjax's natively batched sampler (ddgjax_batched_s)")
    ap.add_argument("--ddgjax_option", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for an extra ddgjax sampling variant "
                         "(ddgjax_variant_* columns of the sample rows); repeat the flag for "
                         "several keys, e.g. model.ppgn.kernels=pallas")
    ap.add_argument("--ddgjax_train_option", action="append", default=[], metavar="KEY=VALUE",
                    help="the same for the train rows (e.g. model.ppgn.remat=true)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes (CPU smoke test): N=12, 16 graphs, batch 8, 4 blocks x 16, "
                         "T=4, 2 steps per call; also --tf32 on and --no_batched")
    args = ap.parse_args(argv)
    if args.quick:
        args.N, args.num_graphs, args.batch, args.hidden, args.blocks, args.T = 12, 16, 8, 16, 4, 4
        args.steps, args.repeat_sample, args.repeat_train = 2, 2, 2
        args.tf32, args.no_batched = "on", True
    args.torch_layouts = [s for s in args.torch_layouts.split(",") if s]
    rows = [r for r in args.rows.split(",") if r]
    dtypes = [d for d in args.dtypes.split(",") if d]
    for r in rows:
        if r not in ("sample", "train"):
            ap.error(f"--rows: unknown row {r!r} (sample, train)")
    for d in dtypes:
        if d not in ("float32", "bfloat16"):
            ap.error(f"--dtypes: unknown dtype {d!r} (float32, bfloat16)")
    for options in (args.ddgjax_option, args.ddgjax_train_option):  # fail fast on a bad option
        bench_core.core_config("float32", options=options)
    use_torch = torch is not None and not args.skip_torch

    jdev = jax.devices()[0]
    meta = {"jax": jax.__version__, "jax_backend": jax.default_backend(),
            "jax_device": str(jdev), "python": platform.python_version(),
            "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
            "xla_python_client_preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
            "sizes": {"N": args.N, "num_graphs": args.num_graphs, "batch": args.batch,
                      "hidden": args.hidden, "blocks": args.blocks, "T": args.T,
                      "train_steps_per_call": args.steps},
            "repeats": {"sample": args.repeat_sample, "train": args.repeat_train},
            "quick": args.quick, "ddgjax_option": args.ddgjax_option,
            "ddgjax_train_option": args.ddgjax_train_option,
            "tf32": args.tf32, "argv": sys.argv[1:]}
    device_name = str(jdev.device_kind)
    if use_torch:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        meta.update({"torch": torch.__version__, "torch_device": str(device),
                     "torch_cuda": torch.version.cuda,
                     "torch_compile_mode": None if args.skip_torch_compile
                     else args.torch_compile_mode,
                     "torch_layouts": args.torch_layouts,
                     "torch_float32_main_columns": "set_float32_matmul_precision('high') (TF32)",
                     "torch_adam": "fused" if device.type == "cuda" else "foreach/default"})
        if device.type == "cuda":
            meta["torch_device_name"] = torch.cuda.get_device_name(device)
            device_name = meta["torch_device_name"]
    meta["columns"] = COLUMNS
    results = {"device": device_name, "meta": meta, "rows": []}

    def save():
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as f:
                json.dump(results, f, indent=2)

    if use_torch:
        t0 = time.perf_counter()
        results["check"] = check_same_function(args, device)
        results["check"]["bf16_agreement"] = bf16_agreement(args, device)
        results["check"]["seconds"] = time.perf_counter() - t0
        c = results["check"]
        print(f"check: float32 max rel err {c['max_rel_err']:.2e} "
              f"(grads {c['max_grad_rel_err']:.1e}) "
              f"({'passed' if c['passed'] else 'FAILED'}, threshold 1e-4); bf16 vs f32: "
              f"ddgjax {c['bf16_agreement']['ddgjax_bf16_vs_f32']:.2e}, "
              f"torch {c['bf16_agreement']['torch_bf16_vs_f32']:.2e}", flush=True)
        save()
        params = ddgjax_params(args, args.N)  # the weights bench_core's ddgjax runs use

    for kind in rows:
        for dtype in dtypes:
            unit, scale = ("s", 1.0) if kind == "sample" else ("ms", 1e3 / args.steps)
            row = {"what": row_name(kind, args), "dtype": dtype, "detail": {}}
            results["rows"].append(row)

            def record(col, timing):
                row[f"{col}_{unit}"] = timing["median_s"] * scale
                d = dict(timing)
                d[f"median_{unit}"] = timing["median_s"] * scale
                d[f"min_{unit}"] = timing["min_s"] * scale
                if "times_s" in d:
                    d[f"times_{unit}"] = [t * scale for t in d.pop("times_s")]
                d["compile_s"] = max(0.0, timing["first_call_s"] - timing["median_s"])
                row["detail"][col] = d
                if col.startswith("torch_compile"):
                    row[col.replace("torch_compile", "torch_compile_time", 1) + "_s"] = \
                        d["compile_s"]
                print(f"  {row['what']} {dtype} {col}: {row[f'{col}_{unit}']:.4g} {unit}",
                      flush=True)
                save()

            jobs = []
            if kind == "sample":
                jobs.append(("ddgjax", lambda: jax_sampling(args, dtype, True)))
                if not args.no_batched:
                    jobs.append(("ddgjax_batched", lambda: jax_sampling(args, dtype, False)))
                if args.ddgjax_option:
                    jobs.append(("ddgjax_variant", lambda: jax_sampling(
                        args, dtype, True, args.ddgjax_option)))
            else:
                jobs.append(("ddgjax", lambda: jax_train(args, dtype)))
                if args.ddgjax_train_option:
                    jobs.append(("ddgjax_variant", lambda: jax_train(
                        args, dtype, args.ddgjax_train_option)))
            if dtype == "float32" and args.tf32 == "both":
                jobs.append(("ddgjax_highest", lambda: (jax_sampling(args, dtype, True,
                                                                     precision="highest")
                                                        if kind == "sample" else
                                                        jax_train(args, dtype,
                                                                  precision="highest"))))
            if use_torch:
                tf32_modes = [True, False] if (dtype == "float32" and args.tf32 == "both") \
                    else [True]
                for li, layout in enumerate(args.torch_layouts):
                    tag = "" if li == 0 else f"_{layout}"
                    for tf32 in tf32_modes:
                        sfx = tag + ("" if tf32 else "_notf32")
                        for compiled in ([False] if args.skip_torch_compile else [False, True]):
                            col = ("torch_compile" if compiled else "torch_eager") + sfx
                            fn = torch_sampling if kind == "sample" else torch_train

                            def job(fn=fn, compiled=compiled, layout=layout, tf32=tf32):
                                set_tf32(tf32)
                                try:
                                    return fn(args, dtype, compiled, layout, params, device)
                                finally:
                                    set_tf32(True)
                                    if device.type == "cuda":
                                        torch.cuda.empty_cache()
                            jobs.append((col, job))
            for col, job in jobs:
                try:
                    record(col, job())
                except Exception as e:  # keep the other columns (e.g. out of memory)
                    row["detail"][col] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
                    print(f"  {row['what']} {dtype} {col}: FAILED {type(e).__name__}: "
                          f"{str(e)[:200]}", flush=True)
                    save()
    save()
    print_table(results)
    return results


def print_table(results):
    print(f"\ndevice: {results['device']}  (jax {results['meta']['jax']}, torch "
          f"{results['meta'].get('torch', '-')})")
    if "check" in results:
        print(f"same-function check (float32): max rel err {results['check']['max_rel_err']:.2e}")
    cols = ["ddgjax", "ddgjax_batched", "ddgjax_variant", "ddgjax_highest", "torch_eager",
            "torch_compile", "torch_eager_notf32", "torch_compile_notf32"]
    present = [c for c in cols if any(c in r["detail"] for r in results["rows"])]
    extra = sorted({c for r in results["rows"] for c in r["detail"]} - set(present))
    present += extra
    head = f"{'row':34s} {'dtype':9s} " + " ".join(f"{c:>20s}" for c in present)
    print(head)
    for r in results["rows"]:
        unit = "s" if r["what"].startswith("sample") else "ms"
        vals = []
        for c in present:
            v = r.get(f"{c}_{unit}")
            vals.append(f"{v:>17.4g} {unit:2s}" if v is not None else f"{'-':>20s}")
        print(f"{r['what']:34s} {r['dtype']:9s} " + " ".join(vals))


if __name__ == "__main__":
    main()
