"""Planar-60 levers (issue 10): train variants side by side on one GPU, then sweep
sampler settings on each, scoring MMDs (paper protocol, against the test split)
and validity (connected and planar), uniqueness and novelty.

    # phase 1: train the variants in parallel, stop them at a deadline, pack each workdir
    python benchmarks/planar_levers.py train --out OUT --runs runs/levers --deadline 480
    # phase 2: unpack, sample every (run, sampler setting), evaluate, write OUT/levers.json
    python benchmarks/planar_levers.py sample --out OUT --runs runs/levers --num_samples 512

A run that the deadline stops samples from its ``latest`` checkpoint; the JSON
records the epochs it reached. Workdirs travel between the phases as
``OUT/<run>.tar.gz`` (the device machine gives back only a few flat files).
Variants and sampler settings are the lists below; docs/RESULTS.md keeps the
table of every lever tried.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# name -> train.py overrides on top of configs/paper.py:planar_60,ppgn,simple
RECIPE = ["--config.diffusion.continuous_time=True", "--config.diffusion.num_timesteps=128",
          "--config.train.batch_size=32", "--config.train.num_epochs=2500",
          "--config.train.ema_decay=0.999", "--config.model.compute_dtype=bfloat16"]
VARIANTS = {
    "ct_uniform": RECIPE,
    "ct_marginal": RECIPE + ["--config.diffusion.prior=marginal"],
    "ct_marginal_seed1": RECIPE + ["--config.diffusion.prior=marginal", "--config.train.seed=1"],
    "ct_marginal_5k": RECIPE + ["--config.diffusion.prior=marginal", "--config.train.num_epochs=5000"],
    # round 7: train more at low noise, and tell the model low levels apart
    "ct_marg_tg2": RECIPE + ["--config.diffusion.prior=marginal",
                             "--config.diffusion.train_grid=power:2"],
    "ct_marg_log": RECIPE + ["--config.diffusion.prior=marginal",
                             "--config.model.ppgn.noise_features=log"],
    "ct_marg_tg2_log": RECIPE + ["--config.diffusion.prior=marginal",
                                 "--config.diffusion.train_grid=power:2",
                                 "--config.model.ppgn.noise_features=log"],
}
# runs of another config than configs/paper.py:planar_60,ppgn,simple: name -> (config, data file
# in the directory of --data)
VARIANT_CONFIGS = {"best_p60": ("configs/best.py:planar_60", "planar_60.json"),
                   "best_p60_d10": ("configs/best.py:planar_60", "planar_60.json"),
                   "best_p64": ("configs/best.py:spectre_planar_64", "spectre_planar_64.json")}
VARIANTS.update({
    # round 8: the recipe as it was then (8 blocks; validation scored Algorithm 1 samples
    # with mixing 0.5 on power:3, then at all 128 levels: a bug since fixed)
    "best_p60": ["--config.model.ppgn.num_blocks=8", "--config.sample.algorithm=1",
                 "--config.sample.grid=power:3", "--config.sample.renoise_mix=0.5"],
    "best_p60_d10": [],  # round 10: today's configs/best.py:planar_60 (10 blocks)
    "best_p64": [],
})
# name -> (num_steps, use_ema, sampler options)
SAMPLERS = {
    "alg1_32": (32, True, {"algorithm": 1}),
    "alg2_32": (32, True, {"algorithm": 2}),
    "alg1_32_raw": (32, False, {"algorithm": 1}),
    "alg1_32_argmax": (32, True, {"algorithm": 1, "argmax_last": True}),
    "alg1_32_pow2": (32, True, {"algorithm": 1, "grid": "power:2"}),
    "alg1_32_pow2_argmax": (32, True, {"algorithm": 1, "grid": "power:2", "argmax_last": True}),
    "alg1_32_final": (32, True, {"algorithm": 1, "final_pass": True}),
    "alg1_64_pow2_argmax": (64, True, {"algorithm": 1, "grid": "power:2", "argmax_last": True}),
    # round 2
    "alg2_32_pow2": (32, True, {"algorithm": 2, "grid": "power:2"}),
    "alg1_32_pow3": (32, True, {"algorithm": 1, "grid": "power:3"}),
    "alg1_32_pow3_argmax": (32, True, {"algorithm": 1, "grid": "power:3", "argmax_last": True}),
    "alg1_32_pow2_argmax_final": (32, True, {"algorithm": 1, "grid": "power:2",
                                             "argmax_last": True, "final_pass": True}),
    "alg1_64_pow3_argmax": (64, True, {"algorithm": 1, "grid": "power:3", "argmax_last": True}),
    "alg1_128_pow2_argmax": (128, True, {"algorithm": 1, "grid": "power:2", "argmax_last": True}),
    "alg1_128_pow3_argmax": (128, True, {"algorithm": 1, "grid": "power:3", "argmax_last": True}),
    # round 4: Algorithm 2 above a noise level, Algorithm 1 below it
    "alg2_32_pow3": (32, True, {"algorithm": 2, "grid": "power:3"}),
    "alg2_64_pow3": (64, True, {"algorithm": 2, "grid": "power:3"}),
    "hyb02_32_pow3": (32, True, {"algorithm": 2, "grid": "power:3", "alg1_below": 0.2}),
    "hyb01_32_pow3": (32, True, {"algorithm": 2, "grid": "power:3", "alg1_below": 0.1}),
    "hyb005_32_pow3": (32, True, {"algorithm": 2, "grid": "power:3", "alg1_below": 0.05}),
    "hyb01_64_pow3": (64, True, {"algorithm": 2, "grid": "power:3", "alg1_below": 0.1}),
    "hyb002_64_pow3": (64, True, {"algorithm": 2, "grid": "power:3", "alg1_below": 0.02}),
    # round 6: Algorithm 2 at 32 steps
    "alg2_32_pow4_argmax": (32, True, {"algorithm": 2, "grid": "power:4", "argmax_last": True}),
    "alg2_32_pow6": (32, True, {"algorithm": 2, "grid": "power:6"}),
    "alg2_32_pow4_final": (32, True, {"algorithm": 2, "grid": "power:4", "final_pass": True}),
    "alg2_32_pow4_raw": (32, False, {"algorithm": 2, "grid": "power:4"}),
    "alg2_48_pow4": (48, True, {"algorithm": 2, "grid": "power:4"}),
    # round 7: Algorithm 1 above a level and Algorithm 2 below; per-pair mixing; sharpening
    "alg2_32_pow4": (32, True, {"algorithm": 2, "grid": "power:4"}),
    "alg1_32_pow3_a2b002": (32, True, {"algorithm": 1, "grid": "power:3", "alg2_below": 0.02}),
    "alg1_32_pow3_a2b005": (32, True, {"algorithm": 1, "grid": "power:3", "alg2_below": 0.05}),
    "alg1_32_pow3_a2b01": (32, True, {"algorithm": 1, "grid": "power:3", "alg2_below": 0.1}),
    "alg1_32_pow3_mix01": (32, True, {"algorithm": 1, "grid": "power:3", "renoise_mix": 0.1}),
    "alg1_32_pow3_mix03": (32, True, {"algorithm": 1, "grid": "power:3", "renoise_mix": 0.3}),
    "alg1_32_pow3_ls15": (32, True, {"algorithm": 1, "grid": "power:3", "logit_scale": 1.5}),
    "alg1_32_pow3_ls2": (32, True, {"algorithm": 1, "grid": "power:3", "logit_scale": 2.0}),
    "alg2_32_pow4_ls15": (32, True, {"algorithm": 2, "grid": "power:4", "logit_scale": 1.5}),
    "alg2_32_pow4_ls2": (32, True, {"algorithm": 2, "grid": "power:4", "logit_scale": 2.0}),
    # round 8: more mixing
    "alg1_32_pow3_mix05": (32, True, {"algorithm": 1, "grid": "power:3", "renoise_mix": 0.5}),
    "alg1_32_pow3_mix07": (32, True, {"algorithm": 1, "grid": "power:3", "renoise_mix": 0.7}),
    "alg1_32_pow3_mix085": (32, True, {"algorithm": 1, "grid": "power:3", "renoise_mix": 0.85}),
    "alg1_32_pow4_mix05": (32, True, {"algorithm": 1, "grid": "power:4", "renoise_mix": 0.5}),
    "alg1_32_pow4_mix07": (32, True, {"algorithm": 1, "grid": "power:4", "renoise_mix": 0.7}),
    "alg1_32_pow3_mix05_a2b002": (32, True, {"algorithm": 1, "grid": "power:3",
                                             "renoise_mix": 0.5, "alg2_below": 0.02}),
    "alg1_64_pow3_mix05": (64, True, {"algorithm": 1, "grid": "power:3", "renoise_mix": 0.5}),
    # round 9: Algorithm 2 at 32 steps, chosen by validity on a separate sampling seed
    "alg2_32_pow5": (32, True, {"algorithm": 2, "grid": "power:5"}),
    "alg2_32_pow3_final": (32, True, {"algorithm": 2, "grid": "power:3", "final_pass": True}),
    "alg2_32_pow4_argmax_final": (32, True, {"algorithm": 2, "grid": "power:4",
                                             "argmax_last": True, "final_pass": True}),
    "alg1_32_pow4_mix085": (32, True, {"algorithm": 1, "grid": "power:4", "renoise_mix": 0.85}),
    "alg1_32_pow5_mix07": (32, True, {"algorithm": 1, "grid": "power:5", "renoise_mix": 0.7}),
}


def pack_for_sampling(workdir: str, tar_path: str) -> None:
    """``tar_path``: the run's record and the parameters and EMA parameters of its
    ``latest`` (and ``best_val``, if any) checkpoints only (no optimizer state, no
    ``best``)."""
    import numpy as np

    from ddgjax import checkpoints
    from ddgjax.models import abstract_params, model_from_config
    from ddgjax.workdir import read_run_record

    name = os.path.basename(workdir.rstrip("/"))
    slim = workdir.rstrip("/") + "_slim"
    os.makedirs(slim, exist_ok=True)
    for f in ("config.json", "dataset.json", "metrics.jsonl"):
        with open(os.path.join(workdir, f)) as src, open(os.path.join(slim, f), "w") as dst:
            dst.write(src.read())
    config, _ = read_run_record(workdir)
    for kind in ("latest", "best_val"):
        if checkpoints.latest_step(workdir, kind) is None:
            continue
        params, ema, meta = checkpoints.restore_params(workdir, kind,
                                                       abstract_params(model_from_config(config)))
        state = {"step": np.asarray(meta["step"]), "params": params, "ema_params": ema,
                 "opt_state": np.zeros(())}
        checkpoints.save(slim, kind, int(meta["step"]), state, meta)
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(slim, arcname=name)


def train_phase(args) -> None:
    os.makedirs(args.runs, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
    procs = {}
    for name in args.variants.split(","):
        config, data_file = VARIANT_CONFIGS.get(name, ("configs/paper.py:planar_60,ppgn,simple",
                                                       os.path.basename(args.data)))
        cmd = [sys.executable, os.path.join(REPO, "train.py"),
               "--config", os.path.join(REPO, config),
               f"--workdir={os.path.join(args.runs, name)}", "--quiet",
               f"--config.data.source={os.path.join(os.path.dirname(args.data), data_file)}",
               *VARIANTS[name], *args.extra.split()]
        log = open(os.path.join(args.out, f"train_{name}.log"), "w")
        procs[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log)
    t0 = time.time()
    while time.time() - t0 < args.deadline and any(p.poll() is None for p, _ in procs.values()):
        time.sleep(5)
    summary = {}
    for name, (p, log) in procs.items():
        stopped = p.poll() is None
        if stopped:  # the deadline: the latest checkpoint is what we sample from
            p.terminate()
            p.wait(timeout=60)
        log.close()
        metrics_path = os.path.join(args.runs, name, "metrics.jsonl")
        metrics = ([json.loads(l) for l in open(metrics_path)]
                   if os.path.exists(metrics_path) else [])
        epochs = [m["epoch"] for m in metrics if "epoch" in m and "loss" in m]
        summary[name] = {"overrides": VARIANTS[name], "stopped_by_deadline": stopped,
                         "returncode": p.returncode, "last_logged_epoch": max(epochs, default=0),
                         "seconds": time.time() - t0}
        if not epochs:  # stopped before its first checkpoint: nothing to sample
            print(f"{name}: no checkpoint (see train_{name}.log)", flush=True)
            continue
        pack_for_sampling(os.path.join(args.runs, name), os.path.join(args.out,
                                                                      f"{name}.tar.gz"))
    with open(os.path.join(args.out, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))


def sample_one_run(args, name: str) -> dict:
    """Every sampler setting on one run; returns {setting: metrics}."""
    from ddgjax.data import load_dataset
    from ddgjax.metrics import evaluate_generated
    from ddgjax.metrics.validity import vun_metrics
    from ddgjax.sampling import generate, load_run

    from per_level_nll import with_compute_dtype

    if args.matmul_precision:
        import jax
        jax.config.update("jax_default_matmul_precision", args.matmul_precision)
    wd = os.path.join(args.runs, name)
    runs = {ema: with_compute_dtype(load_run(wd, args.checkpoint, use_ema=ema),
                                    args.compute_dtype)
            for ema in (False, True)}
    ds = load_dataset(runs[True].config.data.source)
    out = {}
    for setting in args.samplers.split(","):
        steps, use_ema, options = SAMPLERS[setting]
        run = runs[use_ema]
        t0 = time.time()
        res = generate(run, args.num_samples, seed=args.seed, batch_size=args.num_samples,
                       num_steps=steps, **options)
        ev = evaluate_generated(res["graphs"], ds.test, protocol="paper", train=ds.train)
        vun = vun_metrics(res["graphs"], ds.train, "planar")
        out[setting] = {"num_steps": steps, "ema": use_ema, "options": options,
                        "checkpoint_epoch": run.meta.get("epoch"),
                        "compute_dtype": run.config.model.compute_dtype,
                        "matmul_precision": args.matmul_precision or "default",
                        "mmd": {k: ev[k] for k in ("degree", "clustering", "orbit", "avg")},
                        "ratios": {k: ev.get(f"{k}_ratio") for k in ("degree", "clustering",
                                                                     "orbit", "avg")},
                        **{k: v for k, v in vun.items() if isinstance(v, (int, float))},
                        "mean_edges": float(sum(g.number_of_edges() for g in res["graphs"])
                                            / len(res["graphs"])),
                        "sample_seconds": res["seconds"], "compile_seconds": res["compile_seconds"],
                        "wall_seconds": time.time() - t0}
        print(name, setting, json.dumps(out[setting]["mmd"]), out[setting].get("valid"),
              flush=True)
    return out


def sample_phase(args) -> None:
    os.makedirs(args.runs, exist_ok=True)
    names = args.variants.split(",")
    for name in names:
        tar_path = os.path.join(args.tars or args.out, f"{name}.tar.gz")
        if not os.path.isdir(os.path.join(args.runs, name)):
            with tarfile.open(tar_path) as tar:
                tar.extractall(args.runs)
    if args.only_run:  # a worker: one run, results to its own file
        res = sample_one_run(args, args.only_run)
        with open(os.path.join(args.out, f"levers_{args.only_run}.json"), "w") as f:
            json.dump(res, f, indent=2)
        return
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, __file__, "sample", "--out", args.out, "--runs",
                               args.runs, "--variants", args.variants, "--only_run", n,
                               "--num_samples", str(args.num_samples), "--seed", str(args.seed),
                               "--samplers", args.samplers, "--compute_dtype", args.compute_dtype,
                               "--matmul_precision", args.matmul_precision,
                               "--checkpoint", args.checkpoint]
                              + (["--tars", args.tars] if args.tars else []), env=env)
             for n in names]
    for p in procs:
        p.wait()
    merged = {}
    for n in names:
        path = os.path.join(args.out, f"levers_{n}.json")
        if os.path.exists(path):
            merged[n] = json.load(open(path))
            os.remove(path)
    meta = {"dataset": "planar_60 (160 train / 40 test)", "num_samples": args.num_samples,
            "seed": args.seed, "protocol": "paper (MMD vs test split)",
            "checkpoint": args.checkpoint,
            "validity": "connected and planar (networkx)"}
    with open(os.path.join(args.out, args.result_name), "w") as f:
        json.dump({"meta": meta, "results": merged}, f, indent=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("phase", choices=["train", "sample"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", required=True, help="directory of the workdirs")
    ap.add_argument("--tars", default="", help="where the packed workdirs are (default --out)")
    ap.add_argument("--data", default=os.path.join(os.environ.get("DDGJAX_DATA", "../shared/data"),
                                                   "planar_60.json"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds of training")
    ap.add_argument("--num_samples", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only_run", default="")
    ap.add_argument("--result_name", default="levers.json")
    ap.add_argument("--extra", default="", help="more train.py overrides for every variant "
                    "(e.g. tiny sizes for a CPU smoke run)")
    ap.add_argument("--samplers", default=",".join(SAMPLERS), help="sampler settings to sweep")
    ap.add_argument("--checkpoint", default="latest", choices=["latest", "best_val"],
                    help="the checkpoint the sample phase reads")
    ap.add_argument("--compute_dtype", default="", help="sample with this model compute dtype "
                    "instead of the run's")
    ap.add_argument("--matmul_precision", default="", help="jax_default_matmul_precision for "
                    "sampling (highest: float32 products, no TF32)")
    args = ap.parse_args()
    train_phase(args) if args.phase == "train" else sample_phase(args)


if __name__ == "__main__":
    main()
