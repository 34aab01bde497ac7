"""Sample graphs from a trained run.

    python sample.py --workdir runs/cs --num_samples 1024

Writes ``samples/samples.json`` (the JSON graph-list format; ``--graphml``
also writes one GraphML file per graph), ``samples/grid.png`` (generated vs
training graphs) and, where the dataset has a test split, ``samples/eval.json``
with the paper-protocol MMDs against it. Prints graphs/s.
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from absl import app, flags, logging  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "A workdir written by train.py.")
_NUM = flags.DEFINE_integer("num_samples", 0, "Graphs to sample (0: config.sample.num_samples).")
_CKPT = flags.DEFINE_enum("checkpoint", "best", ["best", "latest"], "Which checkpoint to load.")
_SEED = flags.DEFINE_integer("seed", None, "Sampling seed (default: config.sample.seed).")
_BATCH = flags.DEFINE_integer("batch_size", 0, "Graphs per batch (0: config.sample.batch_size).")
_STEPS = flags.DEFINE_integer("num_steps", 0, "Denoising steps (0: config, else all T levels).")
_ALGO = flags.DEFINE_integer("algorithm", 0, "1 or 2 (0: config / by loss).")
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


def run_sampling():
    import networkx as nx

    from ddgjax.datasets import load_dataset
    from ddgjax.graphs import batch_to_graphs, write_graph_list
    from ddgjax.sampling import draw_graph_grid, generate, load_run

    workdir = _WORKDIR.value
    run = load_run(workdir, _CKPT.value, use_ema=_EMA.value)
    cfg = run.config
    num = _NUM.value or cfg.sample.num_samples
    seed = cfg.sample.seed if _SEED.value is None else _SEED.value
    out_dir = _OUT.value or os.path.join(workdir, "samples")
    os.makedirs(out_dir, exist_ok=True)

    def progress(done, total):
        if not _QUIET.value:
            print(f"\rsampled {done}/{total}", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    res = generate(run, num, seed=seed, batch_size=_BATCH.value or cfg.sample.batch_size,
                   algorithm=_ALGO.value or None,
                   num_steps=_STEPS.value or cfg.sample.num_steps or None, progress=progress)
    graphs = res["graphs"]
    info = {"workdir": workdir, "checkpoint": _CKPT.value, "checkpoint_epoch": run.meta.get("epoch"),
            "seed": seed, "algorithm": res["algorithm"], "num_steps": res["num_steps"],
            "num_samples": num, "graphs_per_second": res["graphs_per_second"],
            "compile_seconds": res["compile_seconds"]}
    write_graph_list(os.path.join(out_dir, "samples.json"), graphs, name="samples",
                     generated_by=info)
    if _GRAPHML.value:
        gdir = os.path.join(out_dir, "graphml")
        os.makedirs(gdir, exist_ok=True)
        for i, g in enumerate(graphs):
            nx.write_graphml(g, os.path.join(gdir, f"sample_{i:05d}.graphml"))
    ds = load_dataset(cfg.data.source, seed=cfg.data.seed, allow_pickle=cfg.data.allow_pickle)
    draw_graph_grid(os.path.join(out_dir, "grid.png"),
                    [("generated", graphs[:8]), ("training", ds.train[:8])])
    if _CHAIN.value > 0:
        ch = generate(run, _CHAIN.value, seed=seed, batch_size=_CHAIN.value,
                      algorithm=_ALGO.value or None,
                      num_steps=_STEPS.value or cfg.sample.num_steps or None, return_chain=True)
        levels = np.unique(np.linspace(0, ch["chain"].shape[1] - 1, 8).round().astype(int))
        rows = [(f"graph {m}", batch_to_graphs(ch["chain"][m, levels],
                                               [ch["num_nodes"][m]] * len(levels)))
                for m in range(_CHAIN.value)]
        draw_graph_grid(os.path.join(out_dir, "chain.png"), rows)
    how = f"algorithm {res['algorithm']}" if res["algorithm"] else "Gaussian reverse process"
    print(f"sampled {num} graphs ({res['num_steps']} steps, {how}) "
          f"at {res['graphs_per_second']:.1f} graphs/s (compile {res['compile_seconds']:.1f} s); "
          f"wrote {out_dir}/samples.json and grid.png")
    if _EVAL.value != "none" and ds.test:
        from ddgjax.metrics import evaluate_generated

        t0 = time.time()
        ev = evaluate_generated(graphs, ds.test, protocol=_EVAL.value, train=ds.train)
        ev["eval_seconds"] = time.time() - t0
        ev.update(info)
        with open(os.path.join(out_dir, "eval.json"), "w") as f:
            json.dump(ev, f, indent=2)
        print(json.dumps({k: v for k, v in ev.items() if isinstance(v, (int, float))}))


if __name__ == "__main__":
    from ddgjax.cli import parse_flags

    app.run(main, flags_parser=parse_flags)
