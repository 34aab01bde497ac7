"""The paper's ablation "average MMD vs number of denoising steps" on Ego-small, with timing.

    DDGJAX_DATA=.data python benchmarks/ablation_steps.py --out docs/results/ablation_steps \\
        --epochs 1000 --seeds 4 --steps 8,16,32,48,64,128,256,512,1024 --samples 256

(about 7 minutes on one H200: ~15 ms per epoch of 160 graphs, ~7 s of compilation
per model, ~2 s per (model, K) for sampling and evaluation; see docs/gaussian.md).

For each method (PPGN L_simple, discrete; PPGN-Score, Gaussian) and each training
seed, trains one model with ``ddgjax.training.train`` (T = 1024
levels for both, so every step count <= 1024 is an even stride over trained
levels), then for every step count K samples ``--samples`` graphs with
``ddgjax.sampling.load_run`` / ``generate`` (the ``best`` checkpoint: lowest
training loss, the paper's selection) and evaluates the three paper-protocol MMDs
against the test split with ``ddgjax.metrics.compute_mmds``. Node counts of the
samples come from the training split with ``--sample_seed``, the same for every
K and model.

Sampling time: after all sampling, in the same process, for every method and K
the jitted sampler runs ``--time_repeats`` times on one batch of ``--samples``
graphs (after a warm-up call); the median seconds / ``--samples`` is the time per
graph. It uses the first seed's model, or freshly initialised parameters of the
same model for a method merged from an earlier call (time does not depend on
the weights), so both methods are always timed on the same device.
``generate``'s own one-call measurement is also recorded for every run.

Two calls instead of one (more epochs per call): ``--methods discrete`` first,
then ``--methods gaussian --merge`` with the first call's ``--out`` (its JSON)
present in the repository.

Writes into ``--out``: ``ablation_steps.json`` (everything, rewritten after each
trained model so an interrupted run leaves what it had), ``ablation_steps.png``
(mean ± std of the average MMD over seeds against K, log-x, both methods) and
``ablation_steps.md`` (the tables). Trained runs live in ``--workdir``; rerunning
with the same ``--workdir`` reuses finished models. Compiled programs are cached
on disk (``--workdir``/jax_cache), so the sampler of a given K compiles once for
all seeds.
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
    # name: (configs/paper.py spec, label)
    "discrete": ("ego_small,ppgn,simple", "PPGN L_simple (discrete)"),
    "gaussian": ("ego_small,ppgn,score", "PPGN-Score (Gaussian)"),
}
STATS = ("degree", "clustering", "orbit", "avg")
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory (JSON, PNG, markdown)")
    ap.add_argument("--workdir", default="/tmp/ddgjax_ablation_runs",
                    help="where the trained runs go (reused when rerun)")
    ap.add_argument("--epochs", type=int, default=1000, help="training epochs per model")
    ap.add_argument("--seeds", type=int, default=4, help="training seeds per method (0..S-1)")
    ap.add_argument("--steps", default="8,16,32,48,64,128,256,512,1024",
                    help="comma-separated numbers of denoising steps")
    ap.add_argument("--samples", type=int, default=256, help="graphs sampled per step count")
    ap.add_argument("--timesteps", type=int, default=1024,
                    help="trained levels T of both methods (>= the largest step count)")
    ap.add_argument("--methods", default="discrete,gaussian")
    ap.add_argument("--data", default="", help="Ego-small graph list (default: the config's)")
    ap.add_argument("--batch_size", type=int, default=64, help="training batch size")
    ap.add_argument("--sample_seed", type=int, default=0)
    ap.add_argument("--time_repeats", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="a method 'reaches' the discrete best quality at the first K whose "
                         "mean avg MMD <= (1 + tolerance) * that best")
    ap.add_argument("--compute_dtype", default="float32")
    ap.add_argument("--gaussian_eta", type=float, default=1.0,
                    help="Gaussian sampler: 1 = ancestral DDPM steps (default), 0 = DDIM")
    ap.add_argument("--merge", action="store_true",
                    help="keep the runs of methods not trained now from an earlier "
                         "ablation_steps.json in --out (to split the work over two calls)")
    return ap.parse_args(argv)


def make_config(method: str, args, seed: int):
    from configs import paper

    cfg = paper.get_config(METHODS[method][0])
    if args.data:
        cfg.data.source = args.data
    cfg.diffusion.num_timesteps = args.timesteps
    cfg.train.num_epochs = args.epochs
    cfg.train.seed = seed
    cfg.train.batch_size = args.batch_size
    cfg.train.checkpoint_every_epochs = max(1, args.epochs // 5)
    cfg.train.log_every_epochs = max(1, args.epochs // 20)
    cfg.model.compute_dtype = args.compute_dtype
    # Every config has the Gaussian process's keys; only that process reads them.
    cfg.diffusion.gaussian.eta = args.gaussian_eta
    return cfg


def build_sampler(run, num_steps: int):
    """The same jitted sampler ``ddgjax.sampling.generate`` builds for this run: the
    run's process's ``num_steps``-step sampler with its default options."""
    from ddgjax import sampling

    return sampling.compiled_sampler(run.model, run.process.sampler(num_steps))


def time_sampler(run, num_steps: int, num: int, seed: int, repeats: int) -> float:
    """Median seconds of one call sampling ``num`` graphs (one batch, compiled, warmed up)."""
    from ddgjax.data import sample_node_counts
    from ddgjax.graphs import node_mask_from_counts

    sampler = build_sampler(run, num_steps)
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


def timing_run(method: str, args, workdir: str, dataset):
    """The first seed's trained run of ``method`` if it is in ``workdir``, else the same
    model with freshly initialised parameters (sampling time does not depend on the
    weights), so that both methods are always timed in the same process and device."""
    from ddgjax import checkpoints
    from ddgjax.data import max_num_nodes, node_count_distribution
    from ddgjax.models import init_params, model_from_config
    from ddgjax.processes import process_from_config
    from ddgjax.sampling import Run, load_run

    wd = os.path.join(workdir, f"{method}_seed0")
    if os.path.isdir(wd) and checkpoints.latest_step(wd, "best") is not None:
        return load_run(wd, "best"), "trained"
    cfg = make_config(method, args, 0)
    model = model_from_config(cfg)
    n = max_num_nodes(dataset.train + dataset.test + dataset.val)
    params = init_params(model, jax.random.key(0), n)
    return Run(cfg, model, process_from_config(cfg), params, n,
               node_count_distribution(dataset.train), {}), "initialised"


def reach(mean_by_k: dict, target: float, tol: float):
    """First K (ascending) whose mean is <= (1 + tol) * target, or None."""
    for k in sorted(mean_by_k):
        if mean_by_k[k] <= (1 + tol) * target + 1e-15:
            return k
    return None


def summarise(results: dict, timing: dict, steps: list[int], tol: float) -> dict:
    """Mean / std over seeds per (method, K) and the time-to-quality comparison."""
    agg = {}
    for method, runs in results.items():
        if not runs:
            continue
        agg[method] = {}
        for k in steps:
            rows = [r["by_steps"][str(k)] for r in runs if str(k) in r["by_steps"]]
            if not rows:
                continue
            agg[method][k] = {s: {"mean": float(np.mean([r[s] for r in rows])),
                                  "std": float(np.std([r[s] for r in rows])),
                                  "n": len(rows)} for s in STATS}
    out = {"aggregate": {m: {str(k): v for k, v in a.items()} for m, a in agg.items()}}
    if "discrete" in agg and agg["discrete"]:
        means = {m: {k: v["avg"]["mean"] for k, v in a.items()} for m, a in agg.items()}
        best_k = min(means["discrete"], key=lambda k: means["discrete"][k])
        target = means["discrete"][best_k]
        cmp = {"discrete_best_avg_mmd": target, "discrete_best_steps": best_k,
               "tolerance": tol, "methods": {}}
        for m in agg:
            k = reach(means[m], target, tol)
            t_m = timing.get(m, {})
            entry = {"steps_to_reach": k, "reached": k is not None,
                     "best_avg_mmd": min(means[m].values()),
                     "best_steps": min(means[m], key=lambda kk: means[m][kk])}
            if k is not None and str(k) in t_m:
                entry["seconds_per_graph"] = t_m[str(k)]
            elif k is None and t_m:
                kmax = max(int(x) for x in t_m)
                entry["seconds_per_graph_at_max_steps"] = t_m[str(kmax)]
                entry["max_steps"] = kmax
            cmp["methods"][m] = entry
        d = cmp["methods"].get("discrete", {})
        g = cmp["methods"].get("gaussian", {})
        if "seconds_per_graph" in d and g:
            if "seconds_per_graph" in g:
                cmp["time_ratio_gaussian_over_discrete"] = g["seconds_per_graph"] / d[
                    "seconds_per_graph"]
                cmp["time_ratio_is_lower_bound"] = False
            elif "seconds_per_graph_at_max_steps" in g:
                cmp["time_ratio_gaussian_over_discrete"] = (
                    g["seconds_per_graph_at_max_steps"] / d["seconds_per_graph"])
                cmp["time_ratio_is_lower_bound"] = True
        out["time_to_quality"] = cmp
    return out


def plot(path: str, summary: dict, steps: list[int], num_seeds: int, samples: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colours = {"discrete": "#1f5fa8", "gaussian": "#c0392b"}
    for method, agg in summary["aggregate"].items():
        ks = sorted(int(k) for k in agg)
        mean = np.array([agg[str(k)]["avg"]["mean"] for k in ks])
        std = np.array([agg[str(k)]["avg"]["std"] for k in ks])
        c = colours.get(method)
        ax.plot(ks, mean, "o-", color=c, label=METHODS[method][1], lw=1.6, ms=4)
        ax.fill_between(ks, np.maximum(mean - std, 1e-6), mean + std, color=c, alpha=0.2, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(steps)
    ax.set_xticklabels([str(k) for k in steps])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("denoising steps")
    ax.set_ylabel("average MMD (degree, clustering, orbit)")
    ax.set_title(f"Ego-small: mean ± std over {num_seeds} training seeds, {samples} samples",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def markdown(summary: dict, timing: dict, steps: list[int], meta: dict) -> str:
    lines = ["# Ego-small: average MMD and sampling time vs denoising steps", "",
             f"Device: {meta['device']}; JAX {meta['jax']}; {meta['epochs']} epochs, "
             f"{meta['seeds']} seeds, {meta['samples']} samples per point, T = "
             f"{meta['timesteps']} trained levels. Command: `{meta['command']}`", "",
             *[f"Merged from an earlier call: {m} ({v['epochs']} epochs, {v['device']}; "
               f"`{v['command']}`)." for m, v in meta.get("merged", {}).items()]]

    def step_table(title, columns, cell):
        """A markdown table: one row per step count, one column per method."""
        rows = ["", title, "", "| steps | " + " | ".join(METHODS[m][1] for m in columns) + " |",
                "|---|" + "---|" * len(columns)]
        for k in steps:
            rows.append(f"| {k} | " + " | ".join(cell(m, str(k)) for m in columns) + " |")
        return rows

    agg = summary["aggregate"]
    lines += step_table(
        "## Average MMD (paper protocol), mean ± std over seeds", agg,
        lambda m, k: (f"{agg[m][k]['avg']['mean']:.4f} ± {agg[m][k]['avg']['std']:.4f}"
                      if k in agg[m] else ""))
    lines += step_table(
        "## Per statistic (mean over seeds): degree / clustering / orbit", agg,
        lambda m, k: (" / ".join(f"{agg[m][k][s]['mean']:.4f}" for s in STATS[:3])
                      if k in agg[m] else ""))
    lines += step_table(
        f"## Sampling time per graph (ms; batches of {meta['samples']} graphs, "
        "median of repeated calls)", timing,
        lambda m, k: f"{1e3 * timing[m][k]:.3f}" if k in timing[m] else "")
    ttq = summary.get("time_to_quality")
    if ttq:
        lines += ["", "## Time to reach the discrete model's best quality", "",
                  f"Discrete best mean average MMD: {ttq['discrete_best_avg_mmd']:.4f} at "
                  f"{ttq['discrete_best_steps']} steps (reached = first K with mean <= "
                  f"(1 + {ttq['tolerance']}) x that).", ""]
        for m, e in ttq["methods"].items():
            if e["reached"]:
                t = e.get("seconds_per_graph")
                lines.append(f"- {METHODS[m][1]}: reaches it at {e['steps_to_reach']} steps, "
                             + (f"{1e3 * t:.3f} ms per graph." if t is not None else ""))
            else:
                lines.append(f"- {METHODS[m][1]}: does not reach it within the tested steps "
                             f"(its best: {e['best_avg_mmd']:.4f} at {e['best_steps']} steps).")
        if "time_ratio_gaussian_over_discrete" in ttq:
            r = ttq["time_ratio_gaussian_over_discrete"]
            lines.append("")
            lines.append(f"Time ratio Gaussian / discrete: {'>= ' if ttq['time_ratio_is_lower_bound'] else ''}"
                         f"{r:.1f}x" + (" (lower bound: the Gaussian model never reaches the "
                                          "target; its time at the largest K is used)"
                                          if ttq["time_ratio_is_lower_bound"] else ""))
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    steps = sorted({int(s) for s in args.steps.split(",") if s.strip()})
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"error: unknown method {m!r}; expected {list(METHODS)}")
    if steps[-1] > args.timesteps:
        raise SystemExit(f"error: --steps up to {steps[-1]} needs --timesteps >= {steps[-1]}")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", os.path.join(args.workdir, "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

    from ddgjax.data import load_dataset
    from ddgjax.metrics import compute_mmds
    from ddgjax.sampling import generate, load_run
    from ddgjax.training import train

    cfg0 = make_config(methods[0], args, 0)
    ds = load_dataset(cfg0.data.source, seed=cfg0.data.seed)
    reference = ds.test
    dev = jax.devices()[0]
    meta = {"device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}",
            "num_devices": jax.device_count(), "jax": jax.__version__,
            "python": platform.python_version(), "data": cfg0.data.source,
            "num_reference": len(reference), "num_train": len(ds.train),
            "epochs": args.epochs, "seeds": args.seeds, "samples": args.samples,
            "timesteps": args.timesteps, "steps": steps, "methods": methods,
            "command": "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:]),
            "args": vars(args)}
    log(f"{meta['device']}, reference: {len(reference)} test graphs of {cfg0.data.source}")
    results: dict = {m: [] for m in methods}
    timing: dict = {}
    json_path = os.path.join(args.out, "ablation_steps.json")
    if args.merge and os.path.exists(json_path):
        with open(json_path) as f:
            old = json.load(f)
        for m, runs in old.get("runs", {}).items():
            if m not in methods and runs:
                results[m] = runs
                meta.setdefault("merged", {})[m] = {
                    k: old["meta"].get(k) for k in ("device", "epochs", "samples", "timesteps",
                                                   "steps", "command")}
                log(f"merged {len(runs)} earlier {m} runs from {json_path} "
                    f"({old['meta'].get('epochs')} epochs)")

    def write():
        nonlocal results
        results = {m: results[m] for m in METHODS if m in results}
        summary = summarise(results, timing, steps, args.tolerance)
        tmp = json_path + ".part"
        with open(tmp, "w") as f:
            json.dump({"meta": meta, "runs": results, "timing_seconds_per_graph": timing,
                       **summary}, f, indent=2)
        os.replace(tmp, json_path)
        return summary

    for method in methods:
        for seed in range(args.seeds):
            cfg = make_config(method, args, seed)
            wd = os.path.join(args.workdir, f"{method}_seed{seed}")
            t0 = time.time()
            tr = train(cfg, wd, verbose=False)
            log(f"{method} seed {seed}: trained {tr['epochs']} epochs in {time.time() - t0:.1f} s "
                f"(first call {tr['first_call_seconds'] or 0:.1f} s), best loss "
                f"{tr['best_loss']:.5f}")
            run = load_run(wd, "best")
            entry = {"seed": seed, "workdir": wd, "train": tr,
                     "checkpoint_epoch": run.meta.get("epoch"), "by_steps": {}}
            for k in steps:
                t0 = time.time()
                res = generate(run, args.samples, seed=args.sample_seed,
                               batch_size=args.samples, num_steps=k)
                t_gen = time.time() - t0
                t0 = time.time()
                mmd = compute_mmds(reference, res["graphs"], protocol="paper")
                t_eval = time.time() - t0
                row = {s: float(mmd[s]) for s in STATS}
                row.update(generate_seconds_per_graph=1.0 / res["graphs_per_second"],
                           compile_seconds=res["compile_seconds"],
                           mean_edges=float(np.mean([g.number_of_edges() for g in res["graphs"]])))
                entry["by_steps"][str(k)] = row
                log(f"  {method} seed {seed} K={k:5d}: avg {row['avg']:.4f} (deg "
                    f"{row['degree']:.4f} clus {row['clustering']:.4f} orb {row['orbit']:.4f}), "
                    f"edges {row['mean_edges']:.1f}, {1e3 * row['generate_seconds_per_graph']:.3f}"
                    f" ms/graph; sample {t_gen:.1f} s, eval {t_eval:.1f} s")
            results[method].append(entry)
            write()

    results = {m: results[m] for m in METHODS if m in results}
    # Timing: every method of the results, in this process on this device (see timing_run).
    if args.time_repeats > 0:
        for method in results:
            run, origin = timing_run(method, args, args.workdir, ds)
            timing[method] = {}
            meta.setdefault("timing_params", {})[method] = origin
            for k in steps:
                sec = time_sampler(run, k, args.samples, args.sample_seed, args.time_repeats)
                timing[method][str(k)] = sec / args.samples
                log(f"  time {method} K={k:5d}: {1e3 * sec / args.samples:.4f} ms/graph "
                    f"({args.samples} graphs in {sec:.3f} s, {origin} parameters)")
    summary = write()
    plot(os.path.join(args.out, "ablation_steps.png"), summary, steps, args.seeds, args.samples)
    md = markdown(summary, timing, steps, meta)
    with open(os.path.join(args.out, "ablation_steps.md"), "w") as f:
        f.write(md)
    print(md, flush=True)
    log(f"wrote {json_path}, ablation_steps.png and ablation_steps.md in {args.out}")


if __name__ == "__main__":
    main()
