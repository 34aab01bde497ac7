"""ddgjax-sample (also ``python sample.py``): sample graphs from a trained run.

    ddgjax-sample --workdir runs/ego --num_samples 1024 [--graphml] [--chain_png 4]

Writes OUT (default WORKDIR/samples) whole: samples.json (the JSON graph-list
format), grid.png (generated vs training graphs), with --graphml one GraphML file
per graph, with --chain_png the reverse chain of a few graphs, and, where the
dataset has a test split, eval.json with the MMDs against it. An existing OUT is
replaced only once the new one is complete, and only if it holds nothing but such
files. Prints graphs/s.

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
16); --resample_jump J --resample_rounds R turn on RePaint resampling. OUT gets
samples.json (all completions, those of graph 0 first) and grid.png.
"""
from __future__ import annotations

import json
import os
import sys


# pallas_launch.FP8_ACTIVATION_MODES, spelled out so that defining the flags imports no
# model code (tests/test_cli.py checks they agree)
FP8_ACTIVATION_CHOICES = ("0", "1", "prod", "weights", "weights_y")


def define_flags(fv) -> None:
    """The command's flags, in the FlagValues ``fv``."""
    from absl import flags

    flags.DEFINE_string("workdir", None, "A workdir written by ddgjax-train.", flag_values=fv)
    flags.DEFINE_integer("num_samples", 0, "Graphs to sample (0: config.sample.num_samples).",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_enum("checkpoint", "best", ["best", "latest", "best_val"],
                      "Which checkpoint to load: best (lowest training loss), latest, or "
                      "best_val (best samples on held-out graphs; config.validation).",
                      flag_values=fv)
    flags.DEFINE_integer("seed", None, "Sampling seed (default: config.sample.seed).",
                         flag_values=fv)
    flags.DEFINE_integer("batch_size", 0, "Graphs per batch (0: config.sample.batch_size).",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("num_steps", 0, "Denoising steps (0: config, else all T levels).",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("algorithm", 0, "1 or 2, or 3 (the de-randomised chain: each "
                         "pair drawn once) (0: config / by loss).", lower_bound=0,
                         upper_bound=3, flag_values=fv)
    flags.DEFINE_multi_string(
        "option", [], "A sampler option of the run's noise process, NAME=VALUE (repeatable), "
        "e.g. --option grid=power:2 --option final_pass=true (bit flips: algorithm, grid, "
        "argmax_last, final_pass; Gaussian: eta, clip_x0).", flag_values=fv)
    flags.DEFINE_bool("ema", None, "Use EMA parameters (default: config.sample.use_ema).",
                      flag_values=fv)
    flags.DEFINE_enum("compute_dtype", None, ["float32", "bfloat16"],
                      "The model's arithmetic for sampling (default: as trained).",
                      flag_values=fv)
    flags.DEFINE_bool("pallas", None, "PPGN: run its Pallas kernels (bfloat16 only; the "
                      "fastest sampler with --compute_dtype bfloat16).", flag_values=fv)
    flags.DEFINE_integer("pad_multiple", 0, "PPGN: pad the node axis inside the model to a "
                         "multiple of this (the same function, though in bfloat16 its rounding "
                         "moves some draws; faster where the kernels tile that width better, "
                         "e.g. 32 for SPECTRE SBM's 187 nodes, docs/benchmarks.md rounds 89-94; "
                         "0: as trained, config.model.ppgn.pad_multiple).", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_bool("fp8", False, "With --pallas on Hopper GPUs (H100/H200): store the PPGN's "
                      "pair-MLP outputs in float8 for the per-channel product (the same as "
                      "DDGJAX_FP8_PRODUCT=1; ~8 %% faster, Planar-60 samples as good as "
                      "bfloat16's, docs/benchmarks.md round 37).", flag_values=fv)
    flags.DEFINE_enum("fp8_activations", None, list(FP8_ACTIVATION_CHOICES),
                      "With --pallas and bfloat16 on Hopper GPUs: which activations the PPGN's "
                      "kernels store in float8 (the same as DDGJAX_FP8_ACTIVATIONS): 1 block "
                      "outputs and products, prod products only, weights 1 with float8 "
                      "weights, weights_y weights with the mixing output in float8 too (the "
                      "fastest: 3.85-4.01x torch.compile on H200s; train the model with "
                      "--config.model.ppgn.fp8_weights=true for it, README), 0 none "
                      "(default: the environment's setting, else 0).", flag_values=fv)
    flags.DEFINE_string("guide", None, "Autoguidance (ddgjax.guidance): a weaker run's "
                        "workdir, trained on the same data with the same noise process; "
                        "needs --guidance.", flag_values=fv)
    flags.DEFINE_enum("guide_checkpoint", "latest", ["best", "latest", "best_val"],
                      "The guide's checkpoint. --ema, --compute_dtype, --pallas and "
                      "--pad_multiple apply to the guide too (without --ema it follows its "
                      "own config.sample.use_ema).", flag_values=fv)
    flags.DEFINE_float("guidance", None, "With --guide: the weight w in "
                       "good + w (good - guide): 0 the run alone, > 0 guidance, -0.5 the mean "
                       "of both runs (w >= -1).", flag_values=fv)
    flags.DEFINE_float("guidance_above", 0.0, "With --guide: guide only the steps at noise "
                       "levels beta_bar >= this (0: every step).", flag_values=fv)
    flags.DEFINE_string("ensemble", None, "Ensemble (ddgjax.ensemble): more workdirs, comma-"
                        "separated, trained on the same data with the same bit-flip process; "
                        "every step samples with the average of all runs' denoisers (one "
                        "forward pass each). --checkpoint, --ema, --compute_dtype, --pallas and "
                        "--pad_multiple apply to every member.", flag_values=fv)
    flags.DEFINE_enum("ensemble_mean", "probs", ["probs", "logits"],
                      "With --ensemble: average the members' probabilities (a mixture) or "
                      "their logits (a product of experts).", flag_values=fv)
    flags.DEFINE_string("out", "", "Output directory (default: WORKDIR/samples).", flag_values=fv)
    flags.DEFINE_bool("graphml", False, "Also write one GraphML file per graph.", flag_values=fv)
    flags.DEFINE_enum("protocol", "paper", ["paper", "spectre", "spectre_emd", "none"],
                      "MMD protocol against the test split ('none' to skip).", flag_values=fv)
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
    flags.mark_flags_as_required(["workdir"], flag_values=fv)


def use_fp8_settings(fv, run) -> None:
    """``--fp8`` and ``--fp8_activations``: turn on ``pallas_launch.fp8_product`` /
    ``fp8_activations`` for this process. They are read when the sampler compiles (after
    the run loads, before anything is traced) and apply to the bfloat16 Pallas kernels
    only: without ``--pallas``, or for a run that samples in float32, refuse rather than
    record a setting that did nothing; a ``--fp8_activations`` that contradicts a
    ``DDGJAX_FP8_ACTIVATIONS`` other than ``0`` in the environment is refused too."""
    from ddgjax.sampling import SamplingError

    import warnings

    import jax
    from ddgjax.models import pallas_launch

    wanted = (("--fp8", fv.fp8), ("--fp8_activations", fv.fp8_activations not in (None, "0")))
    on = [flag for flag, is_on in wanted if is_on]
    for flag in on:
        if not fv.pallas:
            raise SamplingError(f"{flag} stores activations of the PPGN's Pallas kernels in "
                                "float8: it needs --pallas (and bfloat16: --compute_dtype "
                                "bfloat16)")
        dtype = str(run.config.model.get("compute_dtype", "float32"))
        if dtype != "bfloat16":
            raise SamplingError(f"{flag}: {fv.workdir} samples in {dtype}; the float8 path is "
                                "part of the bfloat16 Pallas kernels: add --compute_dtype "
                                "bfloat16")
    if on and not pallas_launch.available():
        warnings.warn(f"{' and '.join(on)}: the PPGN's Pallas kernels do not run on this "
                      f"backend ({jax.default_backend()}; GPUs only), so the model takes its "
                      "XLA path and nothing is stored in float8", stacklevel=2)
    if fv.fp8_activations is not None:
        env = os.environ.get("DDGJAX_FP8_ACTIVATIONS", "").strip().lower()
        if env not in ("", "0") and env != fv.fp8_activations:
            raise SamplingError(f"--fp8_activations={fv.fp8_activations} contradicts "
                                f"DDGJAX_FP8_ACTIVATIONS={env} in the environment: give one")
        os.environ["DDGJAX_FP8_ACTIVATIONS"] = fv.fp8_activations
        backend = pallas_launch.kernel_backend()
        if fv.fp8_activations != "0" and backend != "mosaic" and pallas_launch.available():
            warnings.warn(f"--fp8_activations={fv.fp8_activations}: the float8 activations "
                          "live in the Mosaic kernels of Hopper GPUs (H100/H200); this "
                          f"process runs the {backend!r} kernels, so nothing is stored in "
                          "float8", stacklevel=2)
    if fv.fp8:
        os.environ["DDGJAX_FP8_PRODUCT"] = "1"


def model_options(fv) -> dict:
    """``load_run``'s keyword arguments from the flags that change how the model computes
    (``--ema``, ``--compute_dtype``, ``--pallas``, ``--pad_multiple``; None: as trained),
    the same for the run, its ensemble members and its guide."""
    return dict(use_ema=fv.ema, compute_dtype=fv.compute_dtype, pallas=fv.pallas,
                pad_multiple=fv.pad_multiple or None)


def sampler_options(fv) -> dict:
    """``--option`` values plus ``--algorithm`` (when given) as sampler keyword arguments."""
    from ddgjax.cli import parse_option_values

    options = parse_option_values(fv.option, flag="--option")
    if fv.algorithm:
        options["algorithm"] = fv.algorithm
    return options


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


def run_sampling(fv) -> None:
    from ddgjax.sample_writer import check_output_dir, write_sample_dir
    from ddgjax.sampling import configured_num_steps, load_run

    workdir = fv.workdir
    out_dir = fv.out or os.path.join(workdir, "samples")
    options = sampler_options(fv)
    if os.path.isdir(workdir):  # else load_run says the workdir is missing
        check_output_dir(out_dir)  # before the model loads
    guided = guidance_requested(fv)
    members = ensemble_requested(fv)
    run = load_run(workdir, fv.checkpoint, **model_options(fv))
    use_fp8_settings(fv, run)
    record = {"workdir": workdir, "checkpoint": fv.checkpoint}
    if members:
        from ddgjax.ensemble import ensemble_from_workdirs

        run, ensemble = ensemble_from_workdirs(run, members, fv.checkpoint, fv.ensemble_mean,
                                               **model_options(fv))
        record.update(ensemble)
    if guided:
        from ddgjax.guidance import guided_run, load_guide

        guide = load_guide(fv.guide, fv.guide_checkpoint, **model_options(fv))
        run = guided_run(run, guide, fv.guidance, guide_name=f"--guide {fv.guide}",
                         above=fv.guidance_above)
        record.update(guide=fv.guide, guide_checkpoint=fv.guide_checkpoint,
                      guide_epoch=guide.meta.get("epoch"), guidance=float(fv.guidance),
                      guidance_above=float(fv.guidance_above))
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
        sampler_options=options, graphml=fv.graphml, chain_png=fv.chain_png,
        protocol=fv.protocol, record=record, progress=progress)
    res = out["result"]
    how = f"algorithm {res['algorithm']}" if res["algorithm"] else f"{res['process']} process"
    print(f"sampled {num} graphs ({res['num_steps']} steps, {how}) "
          f"at {res['graphs_per_second']:.1f} graphs/s (compile {res['compile_seconds']:.1f} s); "
          f"wrote {out_dir}/samples.json and grid.png")
    if out["eval"] is not None:
        print(json.dumps({k: v for k, v in out["eval"].items() if isinstance(v, (int, float))}))


def guidance_requested(fv) -> bool:
    """Whether --guide is given; ValueError naming the flag when --guide and --guidance
    come apart, or --guidance_above comes without --guide (checked before any checkpoint
    loads)."""
    if fv.guide is None and fv.guidance is not None:
        raise ValueError("--guidance: needs --guide WORKDIR (the weaker run that guides)")
    if fv.guide is None and fv.guidance_above:
        raise ValueError("--guidance_above: needs --guide WORKDIR and --guidance W")
    if fv.guide is not None and fv.guidance is None:
        raise ValueError(f"--guide {fv.guide}: give the weight too, e.g. --guidance 0.5")
    return fv.guide is not None


def ensemble_requested(fv) -> list:
    """The ``--ensemble`` workdirs (empty without it); ValueError naming the flags for an
    empty entry, or for ``--ensemble`` with ``--guide`` (checked before anything loads)."""
    from ddgjax.ensemble import parse_workdirs

    members = parse_workdirs(fv.ensemble)
    if members and fv.guide is not None:
        raise ValueError("--ensemble and --guide: sample either an ensemble or a guided run, "
                         "not both")
    return members


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
    from ddgjax.sampling import configured_num_steps, load_run

    workdir = fv.workdir
    out_dir = fv.out or os.path.join(workdir, "samples")
    options = sampler_options(fv)
    if os.path.isdir(workdir):
        check_output_dir(out_dir)
    if fv.guide is not None or fv.guidance is not None or fv.guidance_above:
        raise ValueError("--guide/--guidance/--guidance_above: autoguidance samples new "
                         "graphs; graph completion (--complete) does not take it")
    if fv.ensemble is not None:
        raise ValueError("--ensemble: ensembles sample new graphs; graph completion "
                         "(--complete) does not take it")
    requests, where = completion_requests(fv)
    run = load_run(workdir, fv.checkpoint, **model_options(fv))
    use_fp8_settings(fv, run)
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
        record={"workdir": workdir, "checkpoint": fv.checkpoint, "inputs": fv.complete,
                "known": fv.known, "hide": fv.hide, "hide_seed": fv.hide_seed,
                "add_nodes": fv.add_nodes},
        where=where)
    print(f"completed {len(requests)} graphs x {num} samples in "
          f"{out['result']['seconds']:.1f} s; wrote {out_dir}/samples.json and grid.png")


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
