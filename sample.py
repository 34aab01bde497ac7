"""Sample graphs from a trained run (``ddgjax.sample_writer`` does the work).

    python sample.py --workdir runs/cs --num_samples 1024

Writes ``samples/samples.json`` (the JSON graph-list format; ``--graphml``
also writes one GraphML file per graph), ``samples/grid.png`` (generated vs
training graphs) and, where the dataset has a test split, ``samples/eval.json``
with the paper-protocol MMDs against it. Prints graphs/s.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from absl import app, flags, logging  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "A workdir written by train.py.")
_NUM = flags.DEFINE_integer("num_samples", 0, "Graphs to sample (0: config.sample.num_samples).")
_CKPT = flags.DEFINE_enum("checkpoint", "best", ["best", "latest", "best_val"],
                          "Which checkpoint to load: best (lowest training loss), latest, or "
                          "best_val (best samples on held-out graphs; config.validation).")
_SEED = flags.DEFINE_integer("seed", None, "Sampling seed (default: config.sample.seed).")
_BATCH = flags.DEFINE_integer("batch_size", 0, "Graphs per batch (0: config.sample.batch_size).")
_STEPS = flags.DEFINE_integer("num_steps", 0, "Denoising steps (0: config, else all T levels).")
_ALGO = flags.DEFINE_integer("algorithm", 0, "1 or 2 (0: config / by loss).")
_OPTION = flags.DEFINE_multi_string(
    "option", [], "A sampler option of the run's noise process, NAME=VALUE (repeatable), e.g. "
    "--option grid=power:2 --option final_pass=true (bit flips: algorithm, grid, argmax_last, "
    "final_pass; Gaussian: eta, clip_x0).")
_EMA = flags.DEFINE_bool("ema", None, "Use EMA parameters (default: config.sample.use_ema).")
_OUT = flags.DEFINE_string("out", "", "Output directory (default: WORKDIR/samples).")
_GRAPHML = flags.DEFINE_bool("graphml", False, "Also write one GraphML file per graph.")
_EVAL = flags.DEFINE_enum("protocol", "paper", ["paper", "spectre", "none"],
                          "MMD protocol against the test split ('none' to skip).")
_CHAIN = flags.DEFINE_integer("chain_png", 0, "Also draw the reverse chain of this many graphs "
                              "(chain.png: A_T ... A_0 at 8 levels).")
_QUIET = flags.DEFINE_bool("quiet", False, "No progress output.")
flags.mark_flags_as_required(["workdir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    logging.set_verbosity(logging.WARNING)  # Orbax logs every file operation at INFO
    from ddgjax import cli

    try:
        run_sampling()
    except cli.user_errors() as e:
        cli.fail(e)


def sampler_options() -> dict:
    from ddgjax.cli import parse_option_values

    options = parse_option_values(_OPTION.value, flag="--option")
    if _ALGO.value:
        options["algorithm"] = _ALGO.value
    return options


def run_sampling():
    from ddgjax.sample_writer import write_sample_dir
    from ddgjax.sampling import load_run

    workdir = _WORKDIR.value
    run = load_run(workdir, _CKPT.value, use_ema=_EMA.value)
    cfg = run.config
    num = _NUM.value or cfg.sample.num_samples
    seed = cfg.sample.seed if _SEED.value is None else _SEED.value
    out_dir = _OUT.value or os.path.join(workdir, "samples")

    def progress(done, total):
        if not _QUIET.value:
            print(f"\rsampled {done}/{total}", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    out = write_sample_dir(
        run, out_dir, num_samples=num, seed=seed,
        batch_size=_BATCH.value or cfg.sample.batch_size,
        num_steps=_STEPS.value or cfg.sample.num_steps or None,
        sampler_options=sampler_options(),
        graphml=_GRAPHML.value, chain_png=_CHAIN.value, protocol=_EVAL.value,
        record={"workdir": workdir, "checkpoint": _CKPT.value}, progress=progress)
    res = out["result"]
    how = f"algorithm {res['algorithm']}" if res["algorithm"] else f"{res['process']} process"
    print(f"sampled {num} graphs ({res['num_steps']} steps, {how}) "
          f"at {res['graphs_per_second']:.1f} graphs/s (compile {res['compile_seconds']:.1f} s); "
          f"wrote {out_dir}/samples.json and grid.png")
    if out["eval"] is not None:
        print(json.dumps({k: v for k, v in out["eval"].items() if isinstance(v, (int, float))}))


if __name__ == "__main__":
    from ddgjax.cli import parse_flags

    app.run(main, flags_parser=parse_flags)
