"""SPECTRE-style evaluation of a trained run: several sampling seeds of as many graphs
as the test split, MMDs against it (raw and as ratios to the train/test floor) and
V.U.N. (valid, unique, novel), mean and std over the seeds.

    python benchmarks/vun_eval.py --workdir runs/spectre_planar_64 --seeds 5 --out OUT
    python benchmarks/vun_eval.py --workdir pretrained:spectre_planar_64 --seeds 5 --out OUT

``--workdir pretrained:NAME`` (or ``pretrained:FILE.npz``) samples a pretrained file instead of
a run (its stored checkpoint and sampler). ``--data NAME`` scores against another dataset's
test split and draws node counts from that dataset's training graphs (e.g. a model trained
on ``sbm_l`` sampled for the ``spectre_sbm`` test: a separate, labelled row).

The checkpoint, the EMA choice and the sampler are the run's config (``config.sample``)
unless overridden (``--checkpoint``, ``--ema``, ``--num_steps``, ``--option NAME=VALUE``
for any sampler option, e.g. ``--option algorithm=1 --option renoise_mix=0.7``).
Writes ``OUT/<name>_seed<k>.json.gz`` (the generated graphs, JSON graph lists) and
``OUT/<name>_vun.json`` (per-seed metrics, mean and std, the sampling settings).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from ddgjax.cli import parse_option_values  # noqa: E402
from ddgjax.data import load_dataset, write_graph_list  # noqa: E402
from ddgjax.data.node_counts import node_count_distribution  # noqa: E402
from ddgjax.metrics import evaluate_generated  # noqa: E402
from ddgjax.sampling import (configured_checkpoint, configured_num_steps,  # noqa: E402
                             generate, generate_seeds)
from ddgjax.trained import load as load_model  # noqa: E402

KEYS = ("degree", "clustering", "orbit", "spectral", "avg", "valid", "unique", "novel", "vun")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True,
                    help="a run's workdir, or pretrained:NAME / pretrained:FILE.npz")
    ap.add_argument("--data", default="",
                    help="score against this dataset (default: the run's) and draw node "
                         "counts from its training graphs")
    ap.add_argument("--checkpoint", default=None, choices=["latest", "best", "best_val"],
                    help="default: the run's config.sample.checkpoint")
    ap.add_argument("--ema", default=None, choices=["true", "false"],
                    help="sample with the EMA parameters (default: config.sample.use_ema)")
    ap.add_argument("--validity", default="planar", choices=["planar", "sbm", "lobster", "none"],
                    help="none: no validity rule (then V.U.N. is not computed)")
    ap.add_argument("--protocol", default="spectre",
                    choices=["spectre", "paper", "spectre_emd", "polygraph", "none"],
                    help="MMD kernels; none: only sample and write the graphs (evaluate the "
                         "files later with check_samples.py)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first_seed", type=int, default=0,
                    help="sampling seeds first_seed .. first_seed + seeds - 1")
    ap.add_argument("--one_request", action="store_true",
                    help="sample all seeds in one request (sampling.generate_seeds): a run "
                         "trained in size buckets compiles each bucket's shape once instead "
                         "of once per power-of-two group size; the same graphs in float32, "
                         "in bfloat16 the batch shapes move a few draws (as a batch size does)")
    ap.add_argument("--num_samples", type=int, default=0, help="0: as many as the test split")
    ap.add_argument("--batch_size", type=int, default=0,
                    help="graphs per sampler call (0: all of a seed at once); with size "
                         "buckets, the batch at the largest bucket (smaller ones take more): "
                         "1,024 SBM-L graphs at 208 nodes asked 88 GB, more than an 80 GB "
                         "card; 256 drew 4,096 SBM-L graphs on an 80 GB H100")
    ap.add_argument("--num_steps", type=int, default=0,
                    help="0: the run's config.sample.num_steps")
    ap.add_argument("--option", action="append", default=[], help="sampler option NAME=VALUE")
    ap.add_argument("--name", default="")
    ap.add_argument("--no_graphs", action="store_true", help="write only the metrics")
    ap.add_argument("--compute_dtype", default=None, choices=["float32", "bfloat16"],
                    help="sample in this precision (default: as trained)")
    ap.add_argument("--kernels", default=None, choices=["xla", "pallas"],
                    help="the PPGN's kernels (default: as trained); pallas: Hopper GPUs")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.protocol == "none" and args.validity != "none":
        ap.error("--protocol none only samples and writes the graphs: pass --validity none "
                 "too, and score the files with benchmarks/check_samples.py")
    validity = None if args.validity == "none" else args.validity

    use_ema = None if args.ema is None else args.ema == "true"
    # a workdir, or pretrained:NAME / FILE (ddgjax.load refuses --checkpoint/--ema for those)
    run = load_model(args.workdir, args.checkpoint, use_ema, compute_dtype=args.compute_dtype,
                     kernels=args.kernels).run
    pretrained = args.workdir.startswith("pretrained:")
    checkpoint = run.checkpoint if pretrained else configured_checkpoint(run.config,
                                                                         args.checkpoint)
    ema = True if pretrained else (bool(run.config.sample.get("use_ema", False))
                                   if use_ema is None else use_ema)
    cfg = run.config
    ds = load_dataset(args.data or cfg.data.source, allow_pickle=cfg.data.allow_pickle)
    if args.data:
        counts = node_count_distribution(ds.train)
        if counts.counts.max() > run.max_nodes:
            ap.error(f"--data {args.data}: graphs of up to {counts.counts.max()} nodes, the "
                     f"model's largest is {run.max_nodes}")
        run = run._replace(node_counts=counts)
    name = args.name or os.path.basename(args.workdir.rstrip("/")).removeprefix(
        "pretrained:").removesuffix(".npz")
    num = args.num_samples or len(ds.test)
    options = parse_option_values(args.option, "--option")
    # 0: the run's config.sample.num_steps, as ddgjax-sample does (None there: all levels)
    num_steps = configured_num_steps(cfg, args.num_steps)
    os.makedirs(args.out, exist_ok=True)
    per_seed = []
    device = jax.devices()[0].device_kind
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    batch = args.batch_size or num
    if args.one_request:   # all seeds' graphs share the batches (sampling.generate_seeds)
        results = generate_seeds(run, num, seeds, batch_size=batch, num_steps=num_steps,
                                 **options)
    else:
        results = (generate(run, num, seed=seed, batch_size=batch, num_steps=num_steps,
                            **options) for seed in seeds)
    for seed, res in zip(seeds, results):
        ev = ({} if args.protocol == "none" else
              evaluate_generated(res["graphs"], ds.test, protocol=args.protocol, train=ds.train,
                                 validity=validity))
        ev.update(seed=seed, seconds_per_graph=res["seconds"] / num)
        per_seed.append(ev)
        if not args.no_graphs:
            write_graph_list(os.path.join(args.out, f"{name}_seed{seed}.json.gz"),
                             res["graphs"], name=f"{name} seed {seed}", generated_by={
                                 "workdir": args.workdir, "checkpoint": checkpoint,
                                 "checkpoint_epoch": run.meta.get("epoch"), "ema": ema,
                                 "seed": seed, "sampler": res["sampler"], "device": device,
                                 "compute_dtype": str(cfg.model.compute_dtype)})
        print(seed, json.dumps({k: ev.get(k) for k in KEYS}), flush=True)
    summary = {}
    for k in KEYS + tuple(f"{s}_ratio" for s in ("degree", "clustering", "orbit", "spectral",
                                                 "avg")):
        vals = [e[k] for e in per_seed if e.get(k) is not None]
        if vals:
            summary[k] = {"mean": float(np.mean(vals)), "std": float(np.std(vals))}
    out = {"workdir": args.workdir, "data": ds.name if args.data else cfg.data.source,
           "checkpoint": checkpoint, "ema": ema,
           "checkpoint_epoch": run.meta.get("epoch"), "protocol": args.protocol,
           "validity": args.validity, "num_samples": num, "batch_size": batch, "num_steps": num_steps,
           "device": device, "compute_dtype": str(cfg.model.compute_dtype),
           "sampler_options": options, "one_request": args.one_request,
           "summary": summary,
           "per_seed": per_seed}
    with open(os.path.join(args.out, f"{name}_vun.json"), "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
