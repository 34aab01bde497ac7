"""SPECTRE-style evaluation of a trained run: several sampling seeds of as many graphs
as the test split, MMDs against it (raw and as ratios to the train/test floor) and
V.U.N. (valid, unique, novel), mean and std over the seeds.

    python benchmarks/vun_eval.py --workdir runs/planar64 --validity planar --seeds 5 \
        --num_steps 64 --option algorithm=1 --option grid=power:3 --out OUT

Writes ``OUT/<name>_seed<k>.json`` (the generated graphs, JSON graph lists) and
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
from ddgjax.ensemble import ensemble_from_workdirs, parse_workdirs  # noqa: E402
from ddgjax.guidance import guided_run, load_guide  # noqa: E402
from ddgjax.metrics import evaluate_generated  # noqa: E402
from ddgjax.sampling import (configured_num_steps, generate, generate_seeds,  # noqa: E402
                             load_run)

KEYS = ("degree", "clustering", "orbit", "spectral", "avg", "valid", "unique", "novel", "vun")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="latest", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true", help="sample with the EMA parameters")
    ap.add_argument("--validity", default="planar", choices=["planar", "sbm", "none"],
                    help="none: no validity rule (then V.U.N. is not computed)")
    ap.add_argument("--protocol", default="spectre",
                    choices=["spectre", "paper", "spectre_emd", "none"],
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
    ap.add_argument("--num_steps", type=int, default=0,
                    help="0: the run's config.sample.num_steps")
    ap.add_argument("--option", action="append", default=[], help="sampler option NAME=VALUE")
    ap.add_argument("--name", default="")
    ap.add_argument("--no_graphs", action="store_true", help="write only the metrics")
    ap.add_argument("--compute_dtype", default=None, choices=["float32", "bfloat16"],
                    help="sample in this precision (default: as trained)")
    ap.add_argument("--pallas", action="store_true", help="PPGN's Pallas kernels (bfloat16)")
    ap.add_argument("--guide", default=None,
                    help="autoguidance (ddgjax.guidance): the weaker run's workdir")
    ap.add_argument("--guide_checkpoint", default="latest",
                    choices=["latest", "best", "best_val"])
    ap.add_argument("--guidance", type=float, default=None, help="with --guide: the weight")
    ap.add_argument("--guidance_above", type=float, default=0.0,
                    help="with --guide: guide only the steps at beta_bar >= this")
    ap.add_argument("--ensemble", default=None,
                    help="ensemble (ddgjax.ensemble): more workdirs, comma-separated, sampled "
                         "with --workdir's (same --checkpoint and --ema)")
    ap.add_argument("--ensemble_mean", default="probs", choices=["probs", "logits"])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.protocol == "none" and args.validity != "none":
        ap.error("--protocol none only samples and writes the graphs: pass --validity none "
                 "too, and score the files with benchmarks/check_samples.py")
    validity = None if args.validity == "none" else args.validity

    if (args.guide is None) != (args.guidance is None):
        ap.error("--guide and --guidance go together")
    if args.guide is None and args.guidance_above:
        ap.error("--guidance_above needs --guide and --guidance")
    run = load_run(args.workdir, args.checkpoint, use_ema=args.ema,
                   compute_dtype=args.compute_dtype, pallas=args.pallas or None)
    guide = None
    if args.guide is not None:
        guide = {"guide": args.guide, "guide_checkpoint": args.guide_checkpoint,
                 "guidance": args.guidance, "guidance_above": args.guidance_above}
        guide_run = load_guide(args.guide, args.guide_checkpoint, use_ema=args.ema,
                               compute_dtype=args.compute_dtype, pallas=args.pallas or None)
        guide["guide_epoch"] = guide_run.meta.get("epoch")
        run = guided_run(run, guide_run, args.guidance, guide_name=f"--guide {args.guide}",
                         above=args.guidance_above)
    members = parse_workdirs(args.ensemble)
    if members:
        if guide is not None:
            ap.error("--ensemble and --guide: one or the other")
        run, ensemble = ensemble_from_workdirs(
            run, members, args.checkpoint, args.ensemble_mean, use_ema=args.ema,
            compute_dtype=args.compute_dtype, pallas=args.pallas or None)
    else:
        ensemble = None
    cfg = run.config
    ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
    name = args.name or os.path.basename(args.workdir.rstrip("/"))
    num = args.num_samples or len(ds.test)
    options = parse_option_values(args.option, "--option")
    # 0: the run's config.sample.num_steps, as ddgjax-sample does (None there: all levels)
    num_steps = configured_num_steps(cfg, args.num_steps)
    os.makedirs(args.out, exist_ok=True)
    per_seed = []
    device = jax.devices()[0].device_kind
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.one_request:   # all seeds' graphs share the batches (sampling.generate_seeds)
        results = generate_seeds(run, num, seeds, batch_size=num, num_steps=num_steps,
                                 **options)
    else:
        results = (generate(run, num, seed=seed, batch_size=num, num_steps=num_steps,
                            **options) for seed in seeds)
    for seed, res in zip(seeds, results):
        ev = ({} if args.protocol == "none" else
              evaluate_generated(res["graphs"], ds.test, protocol=args.protocol, train=ds.train,
                                 validity=validity))
        ev.update(seed=seed, seconds_per_graph=res["seconds"] / num)
        per_seed.append(ev)
        if not args.no_graphs:
            write_graph_list(os.path.join(args.out, f"{name}_seed{seed}.json"), res["graphs"],
                             name=f"{name} seed {seed}", generated_by={
                                 "workdir": args.workdir, "checkpoint": args.checkpoint,
                                 "checkpoint_epoch": run.meta.get("epoch"), "ema": args.ema,
                                 "seed": seed, "sampler": res["sampler"], "device": device,
                                 "compute_dtype": str(cfg.model.compute_dtype),
                                 **(guide or {}), **(ensemble or {})})
        print(seed, json.dumps({k: ev.get(k) for k in KEYS}), flush=True)
    summary = {}
    for k in KEYS + tuple(f"{s}_ratio" for s in ("degree", "clustering", "orbit", "spectral",
                                                 "avg")):
        vals = [e[k] for e in per_seed if e.get(k) is not None]
        if vals:
            summary[k] = {"mean": float(np.mean(vals)), "std": float(np.std(vals))}
    out = {"workdir": args.workdir, "checkpoint": args.checkpoint, "ema": args.ema,
           "checkpoint_epoch": run.meta.get("epoch"), "protocol": args.protocol,
           "validity": args.validity, "num_samples": num, "num_steps": num_steps,
           "device": device, "compute_dtype": str(cfg.model.compute_dtype),
           "sampler_options": options, "guidance": guide, "ensemble": ensemble,
           "one_request": args.one_request,
           "summary": summary,
           "per_seed": per_seed}
    with open(os.path.join(args.out, f"{name}_vun.json"), "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
