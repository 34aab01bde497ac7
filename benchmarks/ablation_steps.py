"""The paper's ablation "average MMD vs number of denoising steps" on Ego-small, at the
paper's own protocol (its Appendix, "Details for Figure 2"), with timing.

    python benchmarks/ablation_steps.py --out OUT --epochs 2500 --seeds 4 --samples 256 \\
        --phase train_sample
    python benchmarks/ablation_steps.py --out OUT --epochs 2500 --seeds 4 --samples 256 \\
        --phase time

Two trained models (``METHODS``), PPGN for both, ``--seeds`` training seeds each, all
seeds of a model trained together by one jitted program (``training.train_seeds``),
``--epochs`` epochs, **no model selection**: every curve samples the ``latest``
checkpoint (the last epoch).

* ``discrete``: PPGN L_simple trained in **continuous time** (``beta_bar ~ U(0, 1/2)``,
  as the original code did), so every K is native.
* ``gaussian``: our DDPM baseline (``ego_small,ppgn,score``: an eps-network on T = 1024
  levels of a Gaussian process over the adjacency; docs/method.md, "The Gaussian
  baseline").

Four curves (``CURVES``) sample those models: the discrete model with K uniform levels
(``grid=uniform``: the paper's protocol) and with the ``power:3`` grid (more steps at
low noise); the Gaussian model with K strided DDPM steps, and with
EDP-GNN-style annealed Langevin dynamics using the same eps-network as the score
(``sampler=langevin``: 6 geometric noise levels, K updates in total). Neither Gaussian
curve is the paper's separately trained score model.

For every curve, seed and K: ``--samples`` graphs (node counts from the training split
with ``--sample_seed``, the same for every point), the three paper-protocol MMDs against
the test split (``compute_mmds``, on ``--eval_workers`` CPU processes while the GPU
samples the next points).

Timing (``--phase time``, or at the end of ``--phase all``): per curve and K, the jitted
sampler on one batch of ``--samples`` graphs, ``--time_repeats`` calls after a warm-up,
median seconds / ``--samples``; run it with the card to itself.

Writes into ``--out``: ``ablation_steps.json`` (``meta``, per-run results, aggregates,
the time-to-quality comparison; rewritten after every trained model), ``ablation_steps.png``
(mean +- std over seeds of the average MMD against K) and ``ablation_steps.md``.
Trained runs live in ``--workdir`` (reused when rerun, training resumes).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

METHODS = {
    # trained model: (configs/paper.py spec, config overrides, label)
    "discrete": ("ego_small,ppgn,simple",
                 {"diffusion.continuous_time": True, "diffusion.train_grid": "uniform"},
                 "PPGN L_simple, continuous time (discrete)"),
    "gaussian": ("ego_small,ppgn,score", {}, "PPGN eps-net, DDPM on 1024 levels (Gaussian)"),
}
CURVES = {
    # curve: (trained model, sampler options, label)
    "discrete_uniform": ("discrete", {"grid": "uniform"},
                         "discrete, K uniform levels (paper protocol)"),
    "discrete_power3": ("discrete", {"grid": "power:3"},
                        "discrete, power:3 grid"),
    "gaussian_ddpm": ("gaussian", {"eta": 1.0}, "Gaussian, DDPM (K strided of 1024 levels)"),
    "gaussian_langevin": ("gaussian", {"sampler": "langevin"},
                          "Gaussian, annealed Langevin (6 levels, K updates)"),
}
REFERENCE_CURVE = "discrete_uniform"
STATS = ("degree", "clustering", "orbit", "avg")
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory (JSON, PNG, markdown)")
    ap.add_argument("--workdir", default="/tmp/ddgjax_ablation_runs",
                    help="where the trained runs go (reused when rerun)")
    ap.add_argument("--epochs", type=int, default=2500, help="training epochs per model")
    ap.add_argument("--seeds", type=int, default=4, help="training seeds per model (0..S-1)")
    ap.add_argument("--steps", default="8,16,32,48,64,128,256,512,1024",
                    help="comma-separated numbers of denoising steps")
    ap.add_argument("--samples", type=int, default=256, help="graphs sampled per point")
    ap.add_argument("--timesteps", type=int, default=1024,
                    help="trained levels T of the Gaussian model (>= the largest step count); "
                         "the discrete model's nominal T (it trains in continuous time)")
    ap.add_argument("--curves", default=",".join(CURVES))
    ap.add_argument("--phase", default="all", choices=["all", "train_sample", "time"],
                    help="time: only the timing, from the trained runs and the JSON in --out")
    ap.add_argument("--data", default="", help="Ego-small graph list (default: the config's)")
    ap.add_argument("--batch_size", type=int, default=64, help="training batch size")
    ap.add_argument("--sample_seed", type=int, default=0)
    ap.add_argument("--time_repeats", type=int, default=3)
    ap.add_argument("--eval_workers", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                    help="CPU processes computing the MMDs")
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="a curve 'reaches' the reference curve's best quality at the first K "
                         "whose mean avg MMD <= (1 + tolerance) * that best")
    ap.add_argument("--compute_dtype", default="float32")
    return ap.parse_args(argv)


def make_config(method: str, args):
    from configs import paper

    spec, overrides, _ = METHODS[method]
    cfg = paper.get_config(spec)
    if args.data:
        cfg.data.source = args.data
    cfg.diffusion.num_timesteps = args.timesteps
    for key, value in overrides.items():
        section, name = key.split(".")
        cfg[section][name] = value
    cfg.train.num_epochs = args.epochs
    cfg.train.batch_size = args.batch_size
    cfg.train.checkpoint_every_epochs = max(1, args.epochs // 2)
    cfg.train.log_every_epochs = max(1, args.epochs // 10)
    cfg.model.compute_dtype = args.compute_dtype
    return cfg


def build_sampler(run, num_steps: int, options: dict):
    """The jitted sampler ``ddgjax.sampling.generate`` builds for this run and options."""
    from ddgjax import sampling

    return sampling.compiled_sampler(run.model, run.process.sampler(num_steps, **options))


def time_sampler(run, num_steps: int, options: dict, num: int, seed: int,
                 repeats: int) -> float:
    """Median seconds of one call sampling ``num`` graphs (one batch, compiled, warmed up)."""
    from ddgjax.data import sample_node_counts
    from ddgjax.graphs import node_mask_from_counts

    sampler = build_sampler(run, num_steps, options)
    counts = sample_node_counts(run.node_counts, num, seed)
    mask = jnp.asarray(node_mask_from_counts(counts, run.max_nodes))
    root = jax.random.key(seed)
    keys = jax.vmap(lambda i: jax.random.fold_in(root, i))(jnp.arange(num))
    jax.block_until_ready(sampler(run.params, keys, mask))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(sampler(run.params, keys, mask))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def reach(mean_by_k: dict, target: float, tol: float):
    """First K (ascending) whose mean is <= (1 + tol) * target, or None."""
    for k in sorted(mean_by_k):
        if mean_by_k[k] <= (1 + tol) * target + 1e-15:
            return k
    return None


def summarise(results: dict, timing: dict, steps: list[int], tol: float) -> dict:
    """Mean / std over seeds per (curve, K) and the time-to-quality comparison against the
    best K of ``REFERENCE_CURVE``."""
    agg = {}
    for curve, runs in results.items():
        agg[curve] = {}
        for k in steps:
            rows = [r["by_steps"][str(k)] for r in runs if str(k) in r["by_steps"]]
            if rows:
                agg[curve][k] = {s: {"mean": float(np.mean([r[s] for r in rows])),
                                     "std": float(np.std([r[s] for r in rows])),
                                     "n": len(rows)} for s in STATS}
    agg = {c: a for c, a in agg.items() if a}
    out = {"aggregate": {c: {str(k): v for k, v in a.items()} for c, a in agg.items()}}
    if REFERENCE_CURVE not in agg:
        return out
    means = {c: {k: v["avg"]["mean"] for k, v in a.items()} for c, a in agg.items()}
    best_k = min(means[REFERENCE_CURVE], key=lambda k: means[REFERENCE_CURVE][k])
    target = means[REFERENCE_CURVE][best_k]
    cmp = {"reference_curve": REFERENCE_CURVE, "reference_best_avg_mmd": target,
           "reference_best_steps": best_k, "tolerance": tol, "curves": {}}
    ref_time = timing.get(REFERENCE_CURVE, {}).get(str(best_k))
    for c in agg:
        k = reach(means[c], target, tol)
        t_c = timing.get(c, {})
        entry = {"steps_to_reach": k, "reached": k is not None,
                 "best_avg_mmd": min(means[c].values()),
                 "best_steps": min(means[c], key=lambda kk: means[c][kk])}
        entry["seconds_per_graph_at_best"] = t_c.get(str(entry["best_steps"]))
        if k is not None and str(k) in t_c:
            entry["seconds_per_graph_to_reach"] = t_c[str(k)]
            if ref_time:
                entry["time_ratio_to_reference"] = t_c[str(k)] / ref_time
        elif k is None and t_c:
            kmax = max(int(x) for x in t_c)
            entry["seconds_per_graph_at_max_steps"] = t_c[str(kmax)]
            if ref_time:
                entry["time_ratio_to_reference_lower_bound"] = t_c[str(kmax)] / ref_time
        cmp["curves"][c] = entry
    out["time_to_quality"] = cmp
    return out


def plot(path: str, summary: dict, steps: list[int], num_seeds: int, samples: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    style = {"discrete_uniform": ("#1f5fa8", "o-"), "discrete_power3": ("#3aa0d8", "s--"),
             "gaussian_ddpm": ("#c0392b", "o-"), "gaussian_langevin": ("#e67e22", "^--")}
    for curve, agg in summary["aggregate"].items():
        ks = sorted(int(k) for k in agg)
        mean = np.array([agg[str(k)]["avg"]["mean"] for k in ks])
        std = np.array([agg[str(k)]["avg"]["std"] for k in ks])
        c, fmt = style.get(curve, (None, "o-"))
        ax.plot(ks, mean, fmt, color=c, label=CURVES[curve][2], lw=1.6, ms=4)
        ax.fill_between(ks, np.maximum(mean - std, 1e-6), mean + std, color=c, alpha=0.15, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(steps)
    ax.set_xticklabels([str(k) for k in steps])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("denoising steps K")
    ax.set_ylabel("average MMD (degree, clustering, orbit)")
    ax.set_title(f"Ego-small, PPGN, last checkpoint: mean ± std over {num_seeds} training "
                 f"seeds, {samples} samples", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def markdown(summary: dict, timing: dict, steps: list[int], meta: dict) -> str:
    lines = ["# Ego-small: average MMD and sampling time vs denoising steps", "",
             f"Device: {meta['device']}; JAX {meta['jax']}; {meta['epochs']} epochs, "
             f"{meta['seeds']} training seeds per model, the last checkpoint, "
             f"{meta['samples']} samples per point. Command: `{meta['command']}`", "",
             *[f"- `{m}`: {METHODS[m][2]}" for m in METHODS], ""]
    if meta.get("timing"):
        lines += [f"Timing: {meta['timing']['device']}, `{meta['timing']['command']}` "
                  "(parameters: " + ", ".join(f"{c} {v}" for c, v in meta["timing"].items()
                                              if c in CURVES) + ")", ""]

    def step_table(title, columns, cell):
        rows = ["", title, "", "| K | " + " | ".join(CURVES[c][2] for c in columns) + " |",
                "|---|" + "---|" * len(columns)]
        for k in steps:
            rows.append(f"| {k} | " + " | ".join(cell(c, str(k)) for c in columns) + " |")
        return rows

    agg = summary["aggregate"]
    lines += step_table(
        "## Average MMD (paper protocol), mean ± std over training seeds", agg,
        lambda c, k: (f"{agg[c][k]['avg']['mean']:.4f} ± {agg[c][k]['avg']['std']:.4f}"
                      if k in agg[c] else ""))
    lines += step_table(
        "## Per statistic (mean over seeds): degree / clustering / orbit", agg,
        lambda c, k: (" / ".join(f"{agg[c][k][s]['mean']:.4f}" for s in STATS[:3])
                      if k in agg[c] else ""))
    if timing:
        lines += step_table(
            f"## Sampling time per graph (ms; batches of {meta['samples']} graphs, median "
            "of repeated calls)", timing,
            lambda c, k: f"{1e3 * timing[c][k]:.3f}" if k in timing[c] else "")
    ttq = summary.get("time_to_quality")
    if ttq:
        lines += ["", "## Time to reach the reference curve's best quality", "",
                  f"Reference: {CURVES[ttq['reference_curve']][2]}, best mean average MMD "
                  f"{ttq['reference_best_avg_mmd']:.4f} at K = {ttq['reference_best_steps']} "
                  f"(reached: the first K with mean <= (1 + {ttq['tolerance']}) x that).", ""]
        for c, e in ttq["curves"].items():
            if e["reached"]:
                t = e.get("seconds_per_graph_to_reach")
                r = e.get("time_ratio_to_reference")
                lines.append(f"- {CURVES[c][2]}: reaches it at K = {e['steps_to_reach']}"
                             + (f", {1e3 * t:.3f} ms per graph" if t else "")
                             + (f" ({r:.1f}x the reference's time)" if r else "") + ".")
            else:
                r = e.get("time_ratio_to_reference_lower_bound")
                lines.append(f"- {CURVES[c][2]}: does not reach it (its best: "
                             f"{e['best_avg_mmd']:.4f} at K = {e['best_steps']})"
                             + (f"; at the largest K it already takes {r:.1f}x the "
                                "reference's time" if r else "") + ".")
    return "\n".join(lines) + "\n"


def _mmd_job(reference, graphs):
    from ddgjax.metrics import compute_mmds

    return {s: float(v) for s, v in compute_mmds(reference, graphs, protocol="paper").items()}


def main(argv=None):
    args = parse_args(argv)
    steps = sorted({int(s) for s in args.steps.split(",") if s.strip()})
    curves = [c.strip() for c in args.curves.split(",") if c.strip()]
    for c in curves:
        if c not in CURVES:
            raise SystemExit(f"error: unknown curve {c!r}; expected some of {list(CURVES)}")
    if steps[-1] > args.timesteps:
        raise SystemExit(f"error: --steps up to {steps[-1]} needs --timesteps >= {steps[-1]}")
    methods = [m for m in METHODS if any(CURVES[c][0] == m for c in curves)]
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", os.path.join(args.workdir, "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

    from ddgjax.data import load_dataset
    from ddgjax.sampling import generate, load_run
    from ddgjax.training import seed_workdir, train_seeds

    cfg0 = make_config(methods[0], args)
    ds = load_dataset(cfg0.data.source)
    reference = ds.test
    dev = jax.devices()[0]
    device = f"{dev.platform}:{getattr(dev, 'device_kind', '')}"
    command = "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:])
    json_path = os.path.join(args.out, "ablation_steps.json")
    seeds = list(range(args.seeds))

    def run_of(method, seed):
        return load_run(seed_workdir(os.path.join(args.workdir, method), seed), "latest")

    def timing_run(method):
        """Seed 0's trained run, or (not in --workdir, e.g. timed on another machine than
        it trained on) the same model freshly initialised: time does not depend on the
        weights."""
        from ddgjax import checkpoints
        from ddgjax.data import max_num_nodes, node_count_distribution
        from ddgjax.models import init_params, model_from_config
        from ddgjax.processes import process_from_config
        from ddgjax.sampling import Run

        wd = seed_workdir(os.path.join(args.workdir, method), 0)
        if os.path.isdir(wd) and checkpoints.latest_step(wd, "latest") is not None:
            return load_run(wd, "latest"), "trained"
        cfg = make_config(method, args)
        model = model_from_config(cfg)
        n = max_num_nodes(ds.train + ds.test + ds.val)
        params = init_params(model, jax.random.key(0), n)
        return Run(cfg, model, process_from_config(cfg), params, n,
                   node_count_distribution(ds.train), {}), "initialised"

    if args.phase == "time":
        with open(json_path) as f:
            saved = json.load(f)
        meta, results = saved["meta"], saved["runs"]
        timing = saved.get("timing_seconds_per_graph", {})
    else:
        meta = {"device": device, "num_devices": jax.device_count(), "jax": jax.__version__,
                "python": platform.python_version(), "data": cfg0.data.source,
                "num_reference": len(reference), "num_train": len(ds.train),
                "epochs": args.epochs, "seeds": args.seeds, "samples": args.samples,
                "checkpoint": "latest (no model selection)", "steps": steps,
                "curves": {c: {"model": CURVES[c][0], "options": CURVES[c][1],
                               "label": CURVES[c][2]} for c in curves},
                "models": {m: {"spec": METHODS[m][0], "overrides": METHODS[m][1],
                               "label": METHODS[m][2], "num_timesteps": args.timesteps}
                           for m in methods},
                "command": command, "args": vars(args), "train": {}}
        results, timing = {c: [] for c in curves}, {}

    def write():
        summary = summarise(results, timing, steps, args.tolerance)
        tmp = json_path + ".part"
        with open(tmp, "w") as f:
            json.dump({"meta": meta, "runs": results, "timing_seconds_per_graph": timing,
                       **summary}, f, indent=2)
        os.replace(tmp, json_path)
        return summary

    if args.phase != "time":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        log(f"{device}, reference: {len(reference)} test graphs of {cfg0.data.source}")
        pool = ProcessPoolExecutor(args.eval_workers,
                                   mp_context=multiprocessing.get_context("spawn"))
        for method in methods:
            cfg = make_config(method, args)
            t0 = time.time()
            tr = train_seeds(cfg, os.path.join(args.workdir, method), seeds, verbose=False)
            meta["train"][method] = {"seconds": time.time() - t0,
                                     **{k: v for k, v in tr.items() if k != "runs"},
                                     "runs": [{k: r.get(k) for k in ("epochs", "best_loss",
                                                                     "final_loss")}
                                              for r in tr["runs"]]}
            log(f"{method}: {len(seeds)} seeds x {args.epochs} epochs trained together in "
                f"{time.time() - t0:.1f} s")
            for seed in seeds:
                run = run_of(method, seed)
                for curve in (c for c in curves if CURVES[c][0] == method):
                    entry = {"seed": seed, "checkpoint_epoch": run.meta.get("epoch"),
                             "by_steps": {}}
                    jobs = {}
                    for k in steps:
                        t0 = time.time()
                        res = generate(run, args.samples, seed=args.sample_seed,
                                       batch_size=args.samples, num_steps=k,
                                       **CURVES[curve][1])
                        jobs[k] = (pool.submit(_mmd_job, reference, res["graphs"]), {
                            "generate_seconds_per_graph": 1.0 / res["graphs_per_second"],
                            "compile_seconds": res["compile_seconds"],
                            "mean_edges": float(np.mean([g.number_of_edges()
                                                         for g in res["graphs"]]))})
                        log(f"  {curve} seed {seed} K={k:5d}: sampled in {time.time() - t0:.1f}"
                            f" s, edges {jobs[k][1]['mean_edges']:.1f}")
                    for k, (fut, row) in jobs.items():
                        row.update(fut.result())
                        entry["by_steps"][str(k)] = row
                        log(f"  {curve} seed {seed} K={k:5d}: avg {row['avg']:.4f} (deg "
                            f"{row['degree']:.4f} clus {row['clustering']:.4f} orb "
                            f"{row['orbit']:.4f})")
                    results[curve].append(entry)
                    write()
        pool.shutdown()
    if args.phase in ("all", "time") and args.time_repeats > 0:
        meta["timing"] = {"device": device, "command": command}
        for curve in results:
            run, origin = timing_run(CURVES[curve][0])
            meta["timing"][curve] = origin
            timing[curve] = {}
            for k in steps:
                sec = time_sampler(run, k, CURVES[curve][1], args.samples, args.sample_seed,
                                   args.time_repeats)
                timing[curve][str(k)] = sec / args.samples
                log(f"  time {curve} K={k:5d}: {1e3 * sec / args.samples:.4f} ms/graph")
            write()
    summary = write()
    plot(os.path.join(args.out, "ablation_steps.png"), summary, steps, len(seeds) if
         args.phase != "time" else meta["seeds"], meta["samples"])
    md = markdown(summary, timing, steps, meta)
    with open(os.path.join(args.out, "ablation_steps.md"), "w") as f:
        f.write(md)
    print(md, flush=True)
    log(f"wrote {json_path}, ablation_steps.png and ablation_steps.md in {args.out}")


if __name__ == "__main__":
    main()
