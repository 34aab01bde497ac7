"""ddgjax-sample (also ``python sample.py``): sample graphs from a trained run.

    ddgjax-sample --workdir runs/ego [--num_samples 1024] [--graphml] [--chain_png 4]
    ddgjax-sample --pretrained p64.npz [--out DIR]      # a file of ddgjax.pretrained

Every sampler setting defaults to the run's config (``config.sample``: the checkpoint,
steps, algorithm, grid and levers; ``config.model``: how the model computes), so the
command with ``--workdir`` alone samples the recipe the run was trained for; a flag
overrides one setting. Writes OUT (default WORKDIR/samples) whole: samples.json (the
JSON graph-list format, with every setting under ``generated_by``), grid.png (generated
vs training graphs), with --graphml one GraphML file per graph, with --chain_png the
reverse chain of a few graphs, and, where the dataset has a test split, eval.json with
the MMDs against it (the run's data are found at the absolute path dataset.json
records; --reference FILE:test scores against data that moved; without evaluation,
--protocol none, no data are read). An existing OUT is replaced only once the new one
is complete, only if it holds nothing but such files, and (without --overwrite) only by
outputs of its own kind. Prints graphs/s.

Graph completion (inpainting): the unknown pairs of given graphs are sampled, the known
ones kept exactly (docs/method.md, "Graph completion")::

    ddgjax-sample --workdir W --complete GRAPHS.json[:SPLIT] --known MASKS.json
    ddgjax-sample --workdir W --complete planar_60:test --hide 0.3 [--hide_seed 0]
    ddgjax-sample --workdir W --complete GRAPHS.json --add_nodes 10

GRAPHS.json is a JSON graph list (or a bundled dataset name, with an optional split);
exactly one of --known (MASKS.json: {"masks": [{"unknown": [[i, j], ...]} or
{"known": [[i, j], ...]}, ...]}, one mask per graph), --hide FRACTION (that fraction of
each graph's pairs unknown, at random) or --add_nodes K (K new nodes, every pair touching
them unknown) says which pairs are unknown. --num_samples completions per graph (default
16); --resample_jump J --resample_rounds R turn on RePaint resampling. OUT (default
WORKDIR/completions) gets samples.json (all completions, those of graph 0 first) and
grid.png.
"""
from __future__ import annotations

import json
import os
import sys


def define_flags(fv) -> None:
    """The command's flags, in the FlagValues ``fv``."""
    from absl import flags

    flags.DEFINE_string("workdir", None, "A workdir written by ddgjax-train.", flag_values=fv)
    flags.DEFINE_string("pretrained", None, "Instead of --workdir: a pretrained file "
                        "(python -m ddgjax.pretrained export) or a shipped model's name.",
                        flag_values=fv)
    flags.DEFINE_integer("num_samples", 0, "Graphs to sample (0: config.sample.num_samples).",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_enum("checkpoint", None, ["best", "latest", "best_val"],
                      "Which checkpoint to load: best (lowest training loss), latest, or "
                      "best_val (best samples on held-out graphs; config.validation) "
                      "(default: config.sample.checkpoint).", flag_values=fv)
    flags.DEFINE_integer("seed", None, "Sampling seed (default: config.sample.seed).",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("batch_size", 0, "Graphs per batch (0: config.sample.batch_size).",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("num_steps", 0, "Denoising steps (0: config.sample.num_steps, else "
                         "all T levels).", lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("algorithm", 0, "Bit flips: 1 or 2 (0: config.sample.algorithm, "
                         "else by loss).", lower_bound=0, upper_bound=2, flag_values=fv)
    flags.DEFINE_string("grid", None, "Bit flips: the levels visited, trained, uniform or "
                        "power:GAMMA (default: config.sample.grid).", flag_values=fv)
    flags.DEFINE_float("renoise_mix", None, "Bit flips, Algorithm 1: the probability that a "
                       "pair takes Algorithm 2's draw (default: config.sample.renoise_mix).",
                       flag_values=fv)
    flags.DEFINE_float("logit_scale", None, "Bit flips: a factor on the denoiser's logits "
                       "(default: config.sample.logit_scale).", flag_values=fv)
    flags.DEFINE_string("label", None, "A model trained with labels (config.condition): "
                        "sample graphs of this class.", flag_values=fv)
    flags.DEFINE_multi_string("property", [], "A model trained with properties: NAME=VALUE "
                              "(repeat the flag for several), e.g. communities=3.",
                              flag_values=fv)
    flags.DEFINE_float("guidance", None, "Classifier-free guidance weight w towards --label / "
                       "--property (default 0: none).",
                       flag_values=fv)
    flags.DEFINE_bool("ema", None, "Use EMA parameters (default: config.sample.use_ema).",
                      flag_values=fv)
    flags.DEFINE_enum("compute_dtype", None, ["float32", "bfloat16"],
                      "The model's arithmetic for sampling (default: as trained).",
                      flag_values=fv)
    flags.DEFINE_enum("kernels", None, ["xla", "pallas"], "PPGN: its XLA block or its Pallas "
                      "kernels (bfloat16 on a GPU: the fastest sampler with --compute_dtype "
                      "bfloat16) (default: config.model.ppgn.kernels).", flag_values=fv)
    flags.DEFINE_integer("pad_multiple", 0, "PPGN: pad the node axis inside the model to a "
                         "multiple of this (the same function, though in bfloat16 its rounding "
                         "moves some draws; faster where the kernels tile that width better, "
                         "e.g. 32 for SPECTRE SBM's 187 nodes; 0: as trained, "
                         "config.model.ppgn.pad_multiple).", lower_bound=0, flag_values=fv)
    flags.DEFINE_string("out", "", "Output directory (default: WORKDIR/samples).", flag_values=fv)
    flags.DEFINE_bool("graphml", False, "Also write one GraphML file per graph.", flag_values=fv)
    flags.DEFINE_enum("protocol", None, ["paper", "spectre", "spectre_emd", "polygraph", "none"],
                      "MMD protocol against the test split ('none' to skip; default: the "
                      "benchmark's, e.g. spectre for the SPECTRE sets, else paper).",
                      flag_values=fv)
    flags.DEFINE_enum("validity", None, ["planar", "sbm", "lobster", "none"],
                      "Validity rule of the V.U.N. in eval.json (default: the benchmark's, "
                      "e.g. planar for Planar-60 and SPECTRE Planar-64; none: no V.U.N.).",
                      flag_values=fv)
    flags.DEFINE_string("reference", None, "Score eval.json against these graphs "
                        "(PATH[:SPLIT], e.g. my.json:test; novelty against the file's train "
                        "split) instead of the run's own data, e.g. after the data moved.",
                        flag_values=fv)
    flags.DEFINE_bool("overwrite", False, "Let samples replace a directory of completions "
                      "(or completions one of samples).", flag_values=fv)
    flags.DEFINE_integer("chain_png", 0, "Also draw the reverse chain of this many graphs "
                         "(chain.png: A_T ... A_0 at 8 levels).", lower_bound=0, flag_values=fv)
    flags.DEFINE_bool("quiet", False, "No progress output.", flag_values=fv)
    flags.DEFINE_string("complete", None, "Complete these graphs (GRAPHS.json[:SPLIT]) "
                        "instead of sampling new ones.", flag_values=fv)
    flags.DEFINE_string("known", None, "With --complete: MASKS.json, the known pairs of each "
                        "graph.", flag_values=fv)
    flags.DEFINE_float("hide", None, "With --complete: hide this fraction of each graph's "
                       "pairs (uniformly at random, --hide_seed).", flag_values=fv)
    flags.DEFINE_integer("hide_seed", 0, "Seed of --hide (graph g uses hide_seed + g).",
                         flag_values=fv)
    flags.DEFINE_integer("add_nodes", None, "With --complete: add this many nodes to each "
                         "graph; every pair touching them is unknown.", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_integer("resample_jump", 0, "With --complete: RePaint resampling, levels per "
                         "block (0: off).", lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("resample_rounds", 0, "With --complete: extra walks of each block "
                         "(0: off).", lower_bound=0, flag_values=fv)
    flags.mark_flags_as_mutual_exclusive(["workdir", "pretrained"], required=True,
                                         flag_values=fv)


def model_options(fv) -> dict:
    """``load_run``'s keyword arguments from the flags that choose the checkpoint and how
    the model computes (``--checkpoint``, ``--ema``, ``--compute_dtype``, ``--kernels``,
    ``--pad_multiple``; None: the run's config)."""
    return dict(checkpoint=fv.checkpoint, use_ema=fv.ema, compute_dtype=fv.compute_dtype,
                kernels=fv.kernels, pad_multiple=fv.pad_multiple or None)


def sampler_options(fv) -> dict:
    """The sampler's keyword arguments from ``--algorithm``, ``--grid``, ``--renoise_mix``,
    ``--logit_scale`` and the condition (``--label``, ``--property``, ``--guidance``):
    only those given (the others are the run's config)."""
    given = {"algorithm": fv.algorithm or None, "grid": fv.grid,
             "renoise_mix": fv.renoise_mix, "logit_scale": fv.logit_scale,
             "label": fv.label, "properties": parse_properties(fv.property) or None,
             "guidance": fv.guidance}
    return {k: v for k, v in given.items() if v is not None}


def parse_properties(items) -> dict:
    """``["communities=3", ...]`` -> ``{"communities": 3.0}``; ValueError naming the item
    that is not NAME=NUMBER."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--property {item}: expected NAME=NUMBER, e.g. "
                             "communities=3") from None
    return out


def main(argv: list | None = None) -> int:
    """Run the command; returns the exit status (see ``ddgjax.cli``)."""
    from absl import flags, logging

    from ddgjax import cli, interrupts

    argv = list(sys.argv if argv is None else argv)
    fv = flags.FlagValues()
    define_flags(fv)
    if cli.wants_help(argv):
        cli.print_help(__doc__, fv)
        return 0
    if (code := cli.parse_flag_values(fv, argv)) is not None:
        return code
    logging.set_verbosity(logging.WARNING)  # Orbax logs every file operation at INFO
    cli.enable_compile_cache()
    interrupts.sigterm_raises_interrupt()
    try:
        run_completion(fv) if fv.complete else run_sampling(fv)
    except KeyboardInterrupt:
        print("interrupted; the output directory was left as it was", file=sys.stderr)
        return interrupts.EXIT_INTERRUPTED
    except cli.user_errors() as e:
        return cli.report_error(e)
    return 0


def load_model(fv):
    """``(run, record)``: the run of ``--workdir`` or ``--pretrained`` (the flags allow
    exactly one), and what the output records of where it came from."""
    from ddgjax.sampling import load_run

    if fv.workdir is not None:
        return load_run(fv.workdir, **model_options(fv)), {"workdir": fv.workdir}
    from ddgjax.pretrained import load_pretrained

    options = model_options(fv)
    if options.pop("checkpoint") is not None or options.pop("use_ema") is not None:
        raise ValueError("--checkpoint and --ema do not apply to --pretrained (a pretrained "
                         "file holds one set of parameters)")
    return load_pretrained(fv.pretrained, **options), {"pretrained": fv.pretrained}


def default_out(fv, kind: str) -> str:
    """``--out``, else ``WORKDIR/<kind>``, or for ``--pretrained`` ``./<name>-<kind>``."""
    if fv.out:
        return fv.out
    if fv.workdir is not None:
        return os.path.join(fv.workdir, kind)
    name = os.path.basename(fv.pretrained.removeprefix("pretrained:")).removesuffix(".npz")
    return f"{name}-{kind}"


def run_sampling(fv) -> None:
    from ddgjax.sample_writer import check_output_dir, write_sample_dir
    from ddgjax.sampling import configured_num_steps

    out_dir = default_out(fv, "samples")
    if fv.workdir is None or os.path.isdir(fv.workdir):  # else: the workdir is missing
        check_output_dir(out_dir, "samples", fv.overwrite)  # before the model loads
    run, record = load_model(fv)
    cfg = run.config
    num = fv.num_samples or cfg.sample.num_samples
    seed = cfg.sample.seed if fv.seed is None else fv.seed

    def progress(done, total):
        if fv.quiet:
            return
        if done == 0:
            print("compiling the sampler...", file=sys.stderr, flush=True)
        else:
            print(f"\rsampled {done}/{total}", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    out = write_sample_dir(
        run, out_dir, num_samples=num, seed=seed,
        batch_size=fv.batch_size or cfg.sample.batch_size,
        num_steps=configured_num_steps(cfg, fv.num_steps),
        sampler_options=sampler_options(fv), graphml=fv.graphml, chain_png=fv.chain_png,
        protocol=fv.protocol, validity=fv.validity, record=record,
        reference=fv.reference, overwrite=fv.overwrite, progress=progress)
    res = out["result"]
    how = f"algorithm {res['algorithm']}" if res["algorithm"] else f"{res['process']} process"
    print(f"sampled {num} graphs ({res['num_steps']} steps, {how}, checkpoint "
          f"{run.checkpoint}) at {res['graphs_per_second']:.1f} graphs/s (compile "
          f"{res['compile_seconds']:.1f} s); wrote {out_dir}/samples.json and grid.png")
    if out["eval"] is not None:
        print(json.dumps({k: v for k, v in out["eval"].items() if isinstance(v, (int, float))}))


def completion_requests(fv) -> tuple[list, callable]:
    """``(requests, where)`` from --complete and one of --known / --hide / --add_nodes:
    ``(adjacency, known)`` pairs, and ``where(g)`` naming graph ``g`` in errors. Read
    before the checkpoint is loaded, so bad input fails fast."""
    import networkx as nx
    import numpy as np

    from ddgjax.completion import extend_graph, hide_pairs, read_masks
    from ddgjax.evaluate import load_graphs

    modes = [name for name in ("known", "hide", "add_nodes") if getattr(fv, name) is not None]
    if len(modes) != 1:
        raise ValueError("--complete: give exactly one of --known MASKS.json, --hide FRACTION "
                         f"or --add_nodes K (got {', '.join('--' + m for m in modes) or 'none'})")
    graphs, _, _ = load_graphs(fv.complete, "--complete")
    adjs = [nx.to_numpy_array(g, nodelist=range(g.number_of_nodes()), dtype=np.uint8,
                              weight=None)
            for g in graphs]
    if fv.known is not None:
        masks = read_masks(fv.known, [len(a) for a in adjs])
        requests = list(zip(adjs, masks))
        where = lambda g: f"{fv.complete}: graph {g} (mask {g} of {fv.known}): "
    elif fv.hide is not None:
        if not 0.0 <= fv.hide <= 1.0:
            raise ValueError(f"--hide: expected a fraction in [0, 1], got {fv.hide}")
        requests = [hide_pairs(a, fv.hide, fv.hide_seed + g) for g, a in enumerate(adjs)]
        where = lambda g: f"{fv.complete}: graph {g}: "
    else:
        requests = [extend_graph(a, fv.add_nodes) for a in adjs]
        where = lambda g: f"{fv.complete}: graph {g} plus {fv.add_nodes} new nodes: "
    return requests, where


def run_completion(fv) -> None:
    from ddgjax.sample_writer import check_output_dir, write_completion_dir
    from ddgjax.sampling import configured_num_steps

    out_dir = default_out(fv, "completions")
    options = sampler_options(fv)
    if {"label", "properties", "guidance"} & set(options):
        raise ValueError("--label, --property and --guidance apply to sampling new graphs, "
                         "not to --complete")
    if fv.workdir is None or os.path.isdir(fv.workdir):
        check_output_dir(out_dir, "completions", fv.overwrite)
    requests, where = completion_requests(fv)
    run, record = load_model(fv)
    cfg = run.config
    num = fv.num_samples or 16
    seed = cfg.sample.seed if fv.seed is None else fv.seed
    if not fv.quiet:
        print(f"completing {len(requests)} graphs x {num} samples (compiling first)...",
              file=sys.stderr, flush=True)
    out = write_completion_dir(
        run, out_dir, requests, num_samples=num, seed=seed,
        batch_size=fv.batch_size or cfg.sample.batch_size,
        num_steps=configured_num_steps(cfg, fv.num_steps), sampler_options=options,
        resample_jump=fv.resample_jump, resample_rounds=fv.resample_rounds,
        record={**record, "inputs": fv.complete,
                "known": fv.known, "hide": fv.hide, "hide_seed": fv.hide_seed,
                "add_nodes": fv.add_nodes},
        where=where, overwrite=fv.overwrite)
    print(f"completed {len(requests)} graphs x {num} samples in "
          f"{out['result']['seconds']:.1f} s; wrote {out_dir}/samples.json and grid.png")


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
