"""One run vs R seeds in one program: wall clock of a paper config.

    python benchmarks/seeds_speed.py --option model.compute_dtype=bfloat16 --out seeds.json
    python benchmarks/seeds_speed.py --seeds 5 --epochs 2  # smoke test

Trains CONFIG (default: the Ego-small paper config, ``paper:ego_small,ppgn,simple``, for its
full paper epochs) (a) as one run with ``training.train`` and (b) as R seeds
(0 .. R-1) in one program with ``training.train_seeds``, each in a fresh temporary
workdir, one after the other on the default device(s), with the config's own
checkpointing (every ``train.checkpoint_every_epochs``, ``latest`` and ``best``).

Reported per phase (and written to --out as JSON):

* ``process_s``: wall clock of the phase's process (each phase runs in a fresh Python
  process, as a user would run it): Python and JAX start-up, data, set-up, compile,
  training, checkpoint saves; ``total_s``: the same from the train call on;
* ``setup_s``: ``total_s`` less ``loop_s``: data, model and state set-up before the loop;
* ``loop_s``: the training loop (``summary["seconds"]``); ``chunk_s``: the host blocked
  in the jitted calls or on their results (a boundary's host work runs while the next
  call trains, and that time is not in ``chunk_s``); ``checkpoint_s``:
  blocked on checkpoint saves; ``first_call_s``: until the first jitted call's results
  (compile + its epochs);
* ``ms_per_step``: steady state, the whole loop after the first call divided by its
  steps (one step of (b) advances every seed); ``compile_s``: ``first_call_s`` less the steady time of its steps (an estimate);
* ``ratio_total`` (``ratio_process``): (b)'s ``total_s`` (``process_s``) over (a)'s, i.e.
  what R seeds in one program cost in single runs.

With ``--epochs`` (a shorter run), checkpoints come every ``epochs // 2`` epochs when
the config's interval would leave fewer than two jitted calls, so that a steady-state
call exists; ``--checkpoint_every N`` sets the interval. Seed 0 of (b) is checked
against (a) (best training loss, to float tolerance). ``--option KEY=VALUE`` overrides
the config (e.g. ``model.compute_dtype=bfloat16``), in both phases.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from ddgjax import training  # noqa: E402
from ddgjax.configuration import get_config  # noqa: E402


def phase(summary: dict, total_s: float, num_epochs: int, ckpt_every: int) -> dict:
    """The timings of one phase from a training summary (see the module docstring)."""
    spe = summary["steps_per_epoch"]
    first_steps = min(ckpt_every, num_epochs) * spe
    rest_steps = summary["steps"] - first_steps
    rest_s = summary["seconds"] - summary["first_call_seconds"]
    step_s = rest_s / rest_steps if rest_steps > 0 else float("nan")
    return {"total_s": total_s, "setup_s": total_s - summary["seconds"],
            "loop_s": summary["seconds"], "chunk_s": summary["chunk_seconds"],
            "checkpoint_s": summary["checkpoint_seconds"],
            "first_call_s": summary["first_call_seconds"],
            "compile_s": summary["first_call_seconds"] - first_steps * step_s,
            "ms_per_step": 1e3 * step_s, "steps": summary["steps"], "steps_per_epoch": spe,
            "epochs": summary["epochs"], "devices": summary["devices"]}


def run_phase(args, cfg, epochs: int, ckpt_every: int, root: str) -> dict:
    """One phase in this process: ``single`` (a) or ``multi`` (b)."""
    jax.numpy.zeros(1).block_until_ready()  # start the backend outside the timings
    t0 = time.time()
    if args.phase == "single":
        cfg.train.seed = 0
        summary = training.train(cfg, os.path.join(root, "single"), verbose=False,
                                 restart=True)
        out = phase(summary, time.time() - t0, epochs, ckpt_every)
        out["best_loss_by_seed"] = [summary["best_loss"]]
    else:
        summary = training.train_seeds(cfg, os.path.join(root, "seeds"),
                                       list(range(args.seeds)), verbose=False, restart=True)
        out = phase(summary, time.time() - t0, epochs, ckpt_every)
        out["best_loss_by_seed"] = [r["best_loss"] for r in summary["runs"]]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="paper:ego_small,ppgn,simple",
                    help="anything --config takes (default: paper:ego_small,ppgn,simple)")
    ap.add_argument("--seeds", type=int, default=5, help="R, the number of seeds of (b)")
    ap.add_argument("--epochs", type=int, default=0, help="train this many epochs (0: the "
                    "config's own, the paper's)")
    ap.add_argument("--checkpoint_every", type=int, default=0, help="checkpoint every this "
                    "many epochs (0: the config's, 100 for the paper configs)")
    ap.add_argument("--skip_single", action="store_true", help="only (b)")
    ap.add_argument("--skip_multi", action="store_true", help="only (a)")
    ap.add_argument("--keep", default="", help="keep the workdirs under this directory")
    ap.add_argument("--option", action="append", default=[],
                    help="config override KEY=VALUE (e.g. model.compute_dtype=bfloat16), "
                         "repeatable")
    ap.add_argument("--out", default="", help="write the results here (JSON)")
    ap.add_argument("--phase", choices=("single", "multi"), help=argparse.SUPPRESS)
    ap.add_argument("--phase_out", help=argparse.SUPPRESS)
    args = ap.parse_args()

    cfg = get_config(args.config)
    from bench_core import apply_options
    apply_options(cfg, args.option)
    if args.epochs:
        cfg.train.num_epochs = args.epochs
        if cfg.train.checkpoint_every_epochs * 2 > args.epochs:
            cfg.train.checkpoint_every_epochs = max(1, args.epochs // 2)
    if args.checkpoint_every:
        cfg.train.checkpoint_every_epochs = args.checkpoint_every
    epochs, ckpt_every = int(cfg.train.num_epochs), int(cfg.train.checkpoint_every_epochs)
    root = args.keep or tempfile.mkdtemp(prefix="seeds-speed-")
    os.makedirs(root, exist_ok=True)
    if args.phase:  # a child process: one phase
        with open(args.phase_out, "w") as f:
            json.dump(run_phase(args, cfg, epochs, ckpt_every, root), f)
        return

    dev = jax.devices()[0]
    result = {"config": args.config, "options": args.option, "epochs": epochs, "checkpoint_every_epochs": ckpt_every,
              "batch_size": int(cfg.train.batch_size), "seeds": args.seeds,
              "device": f"{len(jax.devices())} x {dev.device_kind} ({dev.platform})",
              "jax": jax.__version__, "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d %H:%M")}
    phases = ((["single"] if not args.skip_single else [])
              + (["multi"] if not args.skip_multi else []))
    try:
        for name in phases:
            # Each phase is its own process, as a user runs it: process_s includes Python
            # and JAX start-up; total_s starts at the train call.
            out_json = os.path.join(root, f"{name}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--phase", name, "--phase_out",
                   out_json, "--config", args.config, "--seeds", str(args.seeds),
                   "--epochs", str(args.epochs), "--checkpoint_every", str(args.checkpoint_every),
                   "--keep", root] + [f"--option={o}" for o in args.option]
            t0 = time.time()
            subprocess.run(cmd, check=True)
            with open(out_json) as f:
                result[name] = {"process_s": time.time() - t0, **json.load(f)}
            what = "(a) one run" if name == "single" else f"(b) {args.seeds} seeds, one program"
            print(f"{what}:", json.dumps(result[name]), flush=True)
        if "single" in result and "multi" in result:
            a, b = result["single"], result["multi"]
            result["ratio_total"] = b["total_s"] / a["total_s"]
            result["ratio_process"] = b["process_s"] / a["process_s"]
            print(f"(b)/(a) wall clock: {result['ratio_total']:.2f} from the train call, "
                  f"{result['ratio_process']:.2f} per process; seed 0 best loss "
                  f"{a['best_loss_by_seed'][0]:.6f} (a), {b['best_loss_by_seed'][0]:.6f} (b)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
