"""Time per epoch of the paper configs: a short run of each, then sampling speed.

    python benchmarks/epoch_times.py --epochs 200 --out docs/epoch_times.json CONFIG...

The run is ``--chunks`` jitted calls (checkpoint boundaries) of ``epochs / chunks``
epochs. ``--progress`` trains as the CLI does, with its progress bar on stderr (until
round 17 a host callback in every step; now the loop's equal jitted calls); without it,
quietly (``verbose=False``). ``ms_per_step`` is the steady state of the whole loop after
the first call (checkpoint saves and their final wait included); ``chunk_ms_per_step``
only the time the host spent in the jitted calls after the first or waiting for them
(until round 18 the training steps themselves; since round 19 a boundary's host work
runs while the next call trains, so this is less than the steps' device time).

CONFIG is a config file path, with ``:ARG`` passed to its ``get_config`` as
``--config`` does, e.g. ``configs/paper.py:planar_60,ppgn,simple``.
"""
import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ddgjax import training  # noqa: E402


def load(path):
    path, *arg = path.split(":", 1)
    spec = importlib.util.spec_from_file_location("cfg", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.get_config(*arg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--out", default="")
    ap.add_argument("--chunks", type=int, default=2,
                    help="jitted calls (checkpoint boundaries) per run; the first compiles")
    ap.add_argument("--progress", action="store_true",
                    help="train with the progress bar, as the CLI does (module docstring)")
    ap.add_argument("--option", action="append", default=[],
                    help="config override KEY=VALUE (e.g. model.ppgn.fused=true), repeatable")
    args = ap.parse_args()
    from bench_core import apply_options
    rows = []
    for path in args.configs:
        cfg = load(path)
        apply_options(cfg, args.option)
        cfg.train.num_epochs = args.epochs
        if args.chunks < 2 or args.epochs % args.chunks:
            sys.exit(f"epoch_times.py: --epochs {args.epochs} must be a multiple of --chunks "
                     f"{args.chunks} (>= 2)")
        per_chunk = args.epochs // args.chunks
        cfg.train.checkpoint_every_epochs = per_chunk
        wd = tempfile.mkdtemp()
        t0 = time.time()
        s = training.train(cfg, wd, verbose=args.progress)
        # the first chunk includes compilation; the second is steady state
        steady = (s["seconds"] - s["first_call_seconds"]) / (args.epochs - per_chunk)
        steady_steps = (args.epochs - per_chunk) * s["steps_per_epoch"]
        import jax
        rows.append({"config": path, "options": args.option, "devices": len(jax.devices()),
                     "device_kind": jax.devices()[0].device_kind, "epochs": args.epochs, "total_s": time.time() - t0,
                     "first_call_s": s["first_call_seconds"], "s_per_epoch": steady,
                     "steps_per_epoch": s["steps_per_epoch"],
                     "ms_per_step": 1e3 * steady / s["steps_per_epoch"],
                     "chunk_ms_per_step": 1e3 * (s["chunk_seconds"] - s["first_call_seconds"])
                     / steady_steps,
                     "checkpoint_s": s["checkpoint_seconds"], "chunks": args.chunks,
                     "progress": args.progress})
        print(rows[-1], flush=True)
        shutil.rmtree(wd)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
