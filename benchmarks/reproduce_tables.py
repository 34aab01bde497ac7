"""Rerun the paper's Tables 1-2 end to end on one GPU: train, sample, evaluate, report.

    python benchmarks/reproduce_tables.py --out runs/tables --parallel 6 \
        [--only community_small_ppgn_simple,...] [--phase train|sample|eval]

Runs are named ``DATASET_MODEL_LOSS[_OPTION...]``, the ``configs/paper.py`` spec
with ``_`` for ``,`` (``planar_60_ppgn_simple_t128`` trains
``configs/paper.py:planar_60,ppgn,simple,t128``); the name is also the run's
directory under ``--out`` and the prefix of its sample files.

Phase ``train``: every config of the table trains in its own ``train.py``
process, ``--parallel`` of them at once on the one GPU (the small models are
bound by kernel launches, so several share a GPU well). Phase ``eval``: for
every run, ``--seeds`` sampling seeds of ``--num-samples`` graphs (best-loss
checkpoint), the paper-protocol MMDs against the test split, the train/test
floor and the ratios; writes ``results.json``, ``results.md``, one PNG grid per
run and the samples of the first seed. Phases can run separately
(``--phase train`` / ``--phase eval``), e.g. in two GPU calls.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from configs import paper  # noqa: E402

TABLE = [f"{d}_{m}" for d in ("community_small", "ego_small", "sbm_27", "planar_60")
         for m in ("ppgn_simple", "ppgn_vb", "edp_simple")]


def spec_of(name: str) -> str:
    """Run name -> ``configs/paper.py`` spec, checked: ``"planar_60_ppgn_simple_t128"`` ->
    ``"planar_60,ppgn,simple,t128"``. ValueError for a name that is no paper experiment."""
    for dataset in paper.DATASETS:
        if name.startswith(dataset + "_"):
            model, loss, rest = (name[len(dataset) + 1:].split("_", 2) + ["", ""])[:3]
            fields = [dataset, model, loss]
            while rest:  # options, some of which contain "_" themselves
                opt = next((o for o in paper.OPTIONS if rest == o or rest.startswith(o + "_")),
                           rest)
                fields.append(opt)
                rest = rest[len(opt) + 1:]
            spec = ",".join(fields)
            paper.parse_spec(spec)
            if spec.replace(",", "_") != name:
                raise ValueError(f"run name {name!r}: a stray '_'")
            return spec
    raise ValueError(f"run name {name!r} does not start with a dataset of configs/paper.py "
                     f"({', '.join(paper.DATASETS)})")


def train_all(names, out, parallel, extra):
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
    pending = list(names)
    running = {}
    t_start = time.time()
    while pending or running:
        while pending and len(running) < parallel:
            name = pending.pop(0)
            wd = os.path.join(out, name)
            os.makedirs(wd, exist_ok=True)
            log = open(os.path.join(wd, "train.log"), "w")
            cmd = [sys.executable, os.path.join(REPO, "train.py"),
                   f"--config={os.path.join(REPO, 'configs', 'paper.py')}:{spec_of(name)}",
                   f"--workdir={wd}",
                   "--quiet", *extra.get(name, [])]
            running[name] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log,
                                              stderr=subprocess.STDOUT), time.time(), log)
            print(f"[{time.time() - t_start:7.1f}s] start {name}", flush=True)
        for name, (proc, t0, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                print(f"[{time.time() - t_start:7.1f}s] done {name} rc={proc.returncode} "
                      f"({time.time() - t0:.1f}s)", flush=True)
                del running[name]
        time.sleep(1.0)
    return time.time() - t_start


def train_summary(wd):
    path = os.path.join(wd, "metrics.jsonl")
    if not os.path.exists(path):
        return {}
    ends = [json.loads(l) for l in open(path) if '"event": "end"' in l]
    return ends[-1] if ends else {}


def sample_all(names, out, seeds, num_samples, algorithm=None, tag=""):
    """Sample every run (best checkpoint) for each seed; write samples and timings."""
    from ddgjax.data import write_graph_list
    from ddgjax.sampling import generate, load_run

    for name in names:
        wd = os.path.join(out, name)
        try:
            run = load_run(wd, "best")
        except Exception as e:  # noqa: BLE001 - report and go on with the other runs
            print(f"skip {name}: {e}", flush=True)
            continue
        timings = []
        for seed in range(seeds):
            res = generate(run, num_samples, seed=seed, batch_size=num_samples,
                           algorithm=algorithm)
            timings.append({"seed": seed, "seconds": res["seconds"],
                            "compile_seconds": res["compile_seconds"],
                            "graphs_per_second": res["graphs_per_second"]})
            write_graph_list(os.path.join(out, "samples", f"{name}{tag}_seed{seed}.json"),
                             res["graphs"], name=f"{name}{tag} seed {seed}",
                             generated_by={"checkpoint_epoch": run.meta.get("epoch"),
                                           "algorithm": res["algorithm"],
                                           "num_steps": res["num_steps"]})
            print(f"{name} seed {seed}: {res['graphs_per_second']:.1f} graphs/s", flush=True)
            # rewritten after every seed, so a run stopped by a time limit keeps its timings
            with open(os.path.join(out, "samples", f"{name}{tag}_timing.json"), "w") as f:
                json.dump({"checkpoint_epoch": run.meta.get("epoch"), "seeds": timings,
                           "train": train_summary(wd)}, f, indent=2)


def eval_all(names, out, seeds, num_samples, data_dir="", tag=""):
    """Paper-protocol MMDs of each run's samples (``--phase sample`` output, sampled
    here if missing) against the test split; the train/test floor; ratios."""
    import numpy as np

    from ddgjax.data import load_dataset, read_graph_list
    from ddgjax.metrics import compute_mmds
    from ddgjax.plotting import draw_graph_grid

    results = {}
    floors = {}
    for name in names:
        wd = os.path.join(out, name)
        timing_path = os.path.join(out, "samples", f"{name}{tag}_timing.json")
        if not tag and not os.path.exists(os.path.join(out, "samples", f"{name}_seed0.json")):
            sample_all([name], out, seeds, num_samples)
        if not os.path.exists(timing_path):
            print(f"skip {name}: no samples", flush=True)
            continue
        timing = json.load(open(timing_path))
        with open(os.path.join(wd, "config.json")) as f:
            source = json.load(f)["data"]["source"]
        if data_dir:
            source = os.path.join(data_dir, os.path.basename(source))
        ds = load_dataset(source)
        if source not in floors:
            floors[source] = compute_mmds(ds.test, ds.train, "paper")
        per_seed = []
        for seed in range(seeds):
            path = os.path.join(out, "samples", f"{name}{tag}_seed{seed}.json")
            if not os.path.exists(path):
                break
            graphs = read_graph_list(path).graphs
            t0 = time.time()
            m = compute_mmds(ds.test, graphs, "paper")
            m["eval_seconds"] = time.time() - t0
            per_seed.append(m)
            if seed == 0:
                draw_graph_grid(os.path.join(out, f"{name}{tag}.png"),
                                [("generated", graphs[:8]), ("training", ds.train[:8])])
            print(f"{name} seed {seed}: {m}", flush=True)
        speeds = [t["graphs_per_second"] for t in timing["seeds"]]
        row = {"train": timing.get("train") or train_summary(wd),
               "graphs_per_second": float(np.median(speeds)),
               "checkpoint_epoch": timing.get("checkpoint_epoch"), "floor": floors[source],
               "dataset": os.path.splitext(os.path.basename(source))[0],
               "seeds": per_seed}
        for k in ("degree", "clustering", "orbit", "avg"):
            vals = np.array([s[k] for s in per_seed])
            row[k] = {"mean": float(vals.mean()), "std": float(vals.std())}
            if k in floors[source] and floors[source][k] > 0:
                row[k]["ratio_to_floor"] = float(vals.mean() / floors[source][k])
        results[name + tag] = row
        with open(os.path.join(out, f"results{tag}.json"), "w") as f:
            json.dump(results, f, indent=2)
    write_markdown(results, os.path.join(out, f"results{tag}.md"))
    return results


def write_markdown(results, path):
    lines = ["| run | degree | clustering | orbit | avg | ratios to floor (deg/clus/orb) | "
             "train s | graphs/s |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        cells = [f"{r[k]['mean']:.4f} ± {r[k]['std']:.4f}" for k in
                 ("degree", "clustering", "orbit", "avg")]
        ratios = "/".join(f"{r[k].get('ratio_to_floor', float('nan')):.1f}"
                          for k in ("degree", "clustering", "orbit"))
        lines.append(f"| {name} | " + " | ".join(cells) +
                     f" | {ratios} | {r['train'].get('seconds', float('nan')):.0f} | "
                     f"{r['graphs_per_second']:.0f} |")
    floors = {}
    for name, r in results.items():
        floors[r.get("dataset", name)] = r["floor"]
    lines += ["", "| dataset | floor degree | floor clustering | floor orbit |", "|---|---|---|---|"]
    for d, f in floors.items():
        lines.append(f"| {d} | {f['degree']:.6f} | {f['clustering']:.6f} | {f['orbit']:.6f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="",
                    help="comma-separated run names, DATASET_MODEL_LOSS[_OPTION...] "
                         "(default: Table 1-2)")
    ap.add_argument("--phase", choices=["all", "train", "sample", "eval"], default="all")
    ap.add_argument("--parallel", type=int, default=6)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--num-samples", type=int, default=1024)
    ap.add_argument("--algorithm", type=int, default=0,
                    help="sampling algorithm (0: by loss); with --tag to name the samples")
    ap.add_argument("--tag", default="",
                    help="suffix of sample file names (--phase sample and eval)")
    ap.add_argument("--data-dir", default="",
                    help="read each run's dataset file from here (runs trained elsewhere)")
    ap.add_argument("--override", action="append", default=[],
                    help="NAME:--config.x.y=v extra flag for one run (repeatable)")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or TABLE
    for n in names:
        spec_of(n)  # a bad name fails here, before anything runs
    extra = {}
    for o in args.override:
        n, flag = o.split(":", 1)
        extra.setdefault(n, []).append(flag)
    os.makedirs(args.out, exist_ok=True)
    if args.phase in ("all", "train"):
        total = train_all(names, args.out, args.parallel, extra)
        print(f"training wall time for {len(names)} runs: {total:.1f}s", flush=True)
        with open(os.path.join(args.out, "train_wall.json"), "w") as f:
            json.dump({"runs": names, "parallel": args.parallel, "seconds": total}, f)
    if args.phase in ("all", "sample"):
        os.makedirs(os.path.join(args.out, "samples"), exist_ok=True)
        sample_all(names, args.out, args.seeds, args.num_samples, args.algorithm or None, args.tag)
    if args.phase in ("all", "eval"):
        eval_all(names, args.out, args.seeds, args.num_samples, args.data_dir, args.tag)


if __name__ == "__main__":
    main()
