"""Where the step of several seeds in one program goes, kernel by kernel, against one seed.

    python benchmarks/seeds_profile.py --out OUT_DIR [--seeds 5] [--steps 50]
        [--config ego_small_ppgn_simple] [--option KEY=VALUE ...]

Profiles (``jax.profiler``, ``profile_ppgn.profile_fn``) jitted training chunks of
``--steps`` steps on random graphs of the config's size and batch, without the training
loop (``seeds_speed.py --profile`` profiles whole runs; under JAX 0.11.2 those crashed with
SIGSEGV in round 38-39):

* ``one``: ``training.make_train_chunk``, one seed;
* ``seeds``: ``training.make_train_chunk_seeds``, ``--seeds`` seeds stacked (what
  ``ddgjax-train --seeds`` runs);
* ``wide``: one seed at ``--seeds`` times the batch: the same arithmetic as ``seeds`` without
  the ``vmap`` (whatever ``seeds`` costs beyond it comes from running several models).

``--rows`` picks them (default ``one,seeds,wide``). ``--wall``: no profiler (which turns
XLA's command buffers off unless told otherwise); each row prints its compile seconds and
the median and minimum wall milliseconds per step over ``--calls`` calls.

Writes ``OUT_DIR/profile_<what>.json`` (kernels by device time) and the optimized HLO of each
chunk, and prints device and wall milliseconds per step.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench_core import apply_options, random_graphs  # noqa: E402
from profile_ppgn import profile_fn  # noqa: E402
from ddgjax import training  # noqa: E402
from ddgjax.configuration import get_config  # noqa: E402
from ddgjax.models import model_from_config  # noqa: E402
from ddgjax.parallel import make_mesh  # noqa: E402
from ddgjax.processes import process_from_config  # noqa: E402


def wall_ms_per_step(compiled, cargs, calls: int, steps: int) -> dict:
    """Median and minimum wall milliseconds per step of ``calls`` calls of a compiled chunk
    of ``steps`` steps (after one warm call), each waited for."""
    jax.block_until_ready(compiled(*cargs))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*cargs))
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    return {"wall_ms_per_step": float(np.median(times)), "wall_ms_per_step_min": min(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="ego_small_ppgn_simple")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=18, help="N (Ego-small: 18)")
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--rows", default="one,seeds,wide",
                    help="comma-separated: one, seeds, wide")
    ap.add_argument("--wall", action="store_true", help="time wall clock only, no profiler")
    args = ap.parse_args()
    wanted = [w for w in args.rows.split(",") if w]
    unknown = set(wanted) - {"one", "seeds", "wide"}
    if unknown:
        ap.error(f"--rows: unknown {sorted(unknown)}; expected one, seeds, wide")
    os.makedirs(args.out, exist_ok=True)
    cfg = get_config(args.config)
    apply_options(cfg, args.option)
    model, process = model_from_config(cfg), process_from_config(cfg)
    tx = training.make_optimizer(cfg.train, 1)
    mesh = make_mesh(jax.devices()[:1])
    flat = bool(cfg.train.get("flat_update", False))
    ema = float(cfg.train.get("ema_decay", 0.0))
    copts = training.config_compiler_options(cfg)
    n, bsz, r, s = args.nodes, int(cfg.train.batch_size), args.seeds, args.steps
    adj, mask = random_graphs(bsz * r, n, p=0.3)
    adj = np.concatenate([adj, adj[:1] * 0])                 # the empty padding graph
    mask = np.concatenate([mask, mask[:1] & False])
    states = [training.init_state(model, tx, jax.random.key(i), n) for i in range(r)]
    rows = []
    for what in wanted:
        if what == "seeds":
            chunk = training.make_train_chunk_seeds(
                model, tx, process, mesh, jax.random.split(jax.random.key(1), r),
                ema_decay=ema, flat=flat, compiler_options=copts)
            state = jax.tree_util.tree_map(lambda *x: np.stack([np.asarray(a) for a in x]),
                                           *states)
            idx = np.tile(np.arange(bsz * r, dtype=np.int32).reshape(1, r, bsz), (s, 1, 1))
        else:
            chunk = training.make_train_chunk(model, tx, process, mesh, jax.random.key(1),
                                              ema_decay=ema, flat=flat, compiler_options=copts)
            state = states[0]
            b = bsz * (r if what == "wide" else 1)
            idx = np.tile(np.arange(b, dtype=np.int32)[None], (s, 1))
        cargs = (state, adj, mask, idx)
        t0 = time.perf_counter()
        compiled = chunk.lower(*cargs).compile()
        compile_s = time.perf_counter() - t0
        if args.wall:
            row = dict(what=what, compile_s=compile_s, **wall_ms_per_step(compiled, cargs,
                                                                         args.calls, s))
            print(json.dumps(row), flush=True)
            rows.append(row)
            continue
        with open(os.path.join(args.out, f"chunk_{what}.hlo.txt"), "w") as f:
            f.write(compiled.as_text())
        res = profile_fn(chunk, cargs, args.calls, what, args.out)
        dev = sum(res["device_ms_per_call_by_line"].values()) / s
        kern = sum(k["count_per_call"] for k in res["kernels"]) / s
        row = {"what": what, "device_ms_per_step": dev, "wall_ms_per_step":
               res["wall_ms_per_call"] / s, "kernels_per_step": kern}
        print(json.dumps(row), flush=True)
        rows.append(row)
    dev = jax.devices()[0]
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"device": dev.device_kind, "jax": jax.__version__, "config": args.config,
                   "options": args.option, "seeds": r, "steps": s, "batch": bsz, "nodes": n,
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
