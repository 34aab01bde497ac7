"""Time per epoch of a config: the training loop's steady state, timed as a difference
of whole runs (several GPUs: run it with all of them visible, then with
``CUDA_VISIBLE_DEVICES=0``).

    python benchmarks/epoch_times.py --epochs 450 --chunks 3 paper:planar_60,ppgn,simple \
        --out epoch_times.json

Per CONFIG, three runs in one process, each in a fresh workdir, with JAX's persistent
compilation cache in a temporary directory (so only the first compiles): a warm-up of
one chunk (``epochs / chunks`` epochs; its first call, which compiles, is ``first_call_s``),
then run A of ``--epochs`` in ``--chunks`` jitted calls (checkpoint boundaries) and run B
of one chunk more. ``s_per_epoch`` / ``ms_per_step`` is B's loop time less A's, per epoch
of the extra chunk: the whole loop's steady state (a chunk and its boundary's checkpoint
save), whatever the loop overlaps. ``chunk_ms_per_step`` is the same difference of the time
the host spent in the jitted calls or waiting for them.

(A single run's ``(seconds - first_call_seconds) / (epochs - epochs per chunk)`` is not the
steady state on a GPU: the call that queues the next chunk may return only when that chunk
is nearly done, so the first call can span two chunks.)

``--progress`` trains as the CLI does, with its progress bar on stderr; without it,
quietly (``verbose=False``).

CONFIG is anything ``--config`` takes: a bundled name (``paper:planar_60,ppgn,simple``,
``spectre_sbm``) or a file path with ``:ARG``.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import ml_collections

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ddgjax import training  # noqa: E402
from ddgjax.configuration import get_config  # noqa: E402


def timed_run(cfg, epochs: int, per_chunk: int, progress: bool) -> dict:
    """``training.train``'s end record for ``cfg`` trained ``epochs`` epochs in jitted calls
    of ``per_chunk`` epochs (a checkpoint at each boundary), in a fresh workdir."""
    cfg = ml_collections.ConfigDict(cfg.to_dict())
    cfg.train.num_epochs = epochs
    cfg.train.checkpoint_every_epochs = per_chunk
    wd = tempfile.mkdtemp()
    try:
        return training.train(cfg, wd, verbose=progress)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--out", default="")
    ap.add_argument("--chunks", type=int, default=2,
                    help="jitted calls (checkpoint boundaries) of the timed run A; run B "
                         "has one more (module docstring)")
    ap.add_argument("--progress", action="store_true",
                    help="train with the progress bar, as the CLI does (module docstring)")
    ap.add_argument("--option", action="append", default=[],
                    help="config override KEY=VALUE (e.g. model.compute_dtype=bfloat16), "
                         "repeatable")
    args = ap.parse_args()
    from bench_core import apply_options
    rows = []
    import jax
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="epoch_times_cache_"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    for path in args.configs:
        cfg = apply_options(ml_collections.ConfigDict(get_config(path).to_dict()), args.option)
        if args.chunks < 1 or args.epochs % args.chunks:
            sys.exit(f"epoch_times.py: --epochs {args.epochs} must be a multiple of --chunks "
                     f"{args.chunks} (>= 1)")
        per_chunk = args.epochs // args.chunks
        t0 = time.time()
        warm = timed_run(cfg, per_chunk, per_chunk, args.progress)
        a = timed_run(cfg, args.epochs, per_chunk, args.progress)
        b = timed_run(cfg, args.epochs + per_chunk, per_chunk, args.progress)
        spe = a["steps_per_epoch"]
        steady = (b["seconds"] - a["seconds"]) / per_chunk
        rows.append({"config": path, "options": args.option, "devices": len(jax.devices()),
                     "device_kind": jax.devices()[0].device_kind, "epochs": args.epochs,
                     "total_s": time.time() - t0, "first_call_s": warm["first_call_seconds"],
                     "loop_s": a["seconds"], "s_per_epoch": steady, "steps_per_epoch": spe,
                     "ms_per_step": 1e3 * steady / spe,
                     "chunk_ms_per_step": 1e3 * (b["chunk_seconds"] - a["chunk_seconds"])
                     / (per_chunk * spe),
                     "checkpoint_s": a["checkpoint_seconds"], "chunks": args.chunks,
                     "progress": args.progress})
        print(rows[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
