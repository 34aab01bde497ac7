"""ddgjax-train (also ``python train.py``): train a graph diffusion model.

    ddgjax-train --config spectre_planar_64 --workdir runs/planar
    ddgjax-train --config quickstart --workdir runs/quickstart
    ddgjax-train --config paper:community_small,ppgn,simple --workdir runs/cs
    ddgjax-train --config test --workdir /tmp/t --config.train.num_epochs=10
    ddgjax-train --config ego_small_ppgn_simple --workdir runs/ego5 --seeds 0,1,2,3,4

--config is a config file (FILE[:ARG]) or a bundled config: default, quickstart,
test, a benchmark dataset (its best recipe, e.g. spectre_planar_64) or a paper
experiment paper:DATASET,MODEL,LOSS (or DATASET_MODEL_LOSS, e.g.
ego_small_ppgn_simple). Any key can be overridden with --config.SECTION.KEY=VALUE.
Resumes from --workdir when it holds a checkpoint of the same run; --restart starts
over there (the old run is moved aside). Ctrl-C finishes a checkpoint save in
progress and exits with 130.
--seeds S1,S2,... trains one run per seed (config.train.seed = S) in one program
(one jitted step advances all of them; not with size buckets): run S is
WORKDIR/seed_S, the same workdir a single run with --config.train.seed=S would
leave (sample or evaluate it as any run); they resume together.
Multi-host: --coordinator host:port --num_processes P --process_id i on each host
(or a cluster environment that jax.distributed.initialize() recognises).
"""
from __future__ import annotations

import os
import sys


def define_flags(fv, argv: list) -> None:
    """The command's flags, in the FlagValues ``fv`` (``argv`` carries the config overrides)."""
    from absl import flags
    from ml_collections import config_flags

    config_flags.DEFINE_config_file("config", None, "Config file FILE[:ARG] or a bundled config "
                                    "name (e.g. spectre_planar_64).", flag_values=fv,
                                    lock_config=True, sys_argv=argv)
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs and config.",
                        flag_values=fv)
    flags.DEFINE_integer("stop_after_epochs", 0, "Stop after this many epochs of this "
                         "invocation (0: run to the end).", lower_bound=0, flag_values=fv)
    flags.DEFINE_bool("restart", False, "Start over in a workdir that holds a run (it is moved "
                      "to WORKDIR/replaced-<time>/, not deleted).", flag_values=fv)
    flags.DEFINE_string("coordinator", "", "Multi-host coordinator address host:port.",
                        flag_values=fv)
    flags.DEFINE_integer("num_processes", 0, "Multi-host: number of processes.", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_integer("process_id", -1, "Multi-host: this process's id.", flag_values=fv)
    flags.DEFINE_bool("quiet", False, "No progress bar.", flag_values=fv)
    flags.DEFINE_list("seeds", [], "Train one run per seed (e.g. 0,1,2,3,4) in one program, "
                      "run S in WORKDIR/seed_S (config.train.seed is set per run).",
                      flag_values=fv)
    flags.mark_flags_as_required(["config", "workdir"], flag_values=fv)


def main(argv: list | None = None) -> int:
    """Run the command; returns the exit status (see ``ddgjax.cli``)."""
    from absl import flags, logging

    from ddgjax import cli, interrupts
    from ddgjax.configuration import ConfigError

    argv = list(sys.argv if argv is None else argv)
    fv = flags.FlagValues()
    if cli.wants_help(argv):
        define_flags(fv, argv[:1])
        cli.print_help(__doc__, fv)
        return 0
    try:
        argv = cli.resolve_config_flag(argv)
    except ConfigError as e:
        return cli.report_error(e, cli.EXIT_USAGE)
    define_flags(fv, argv)
    if (code := cli.parse_flag_values(fv, argv)) is not None:
        return code
    logging.set_verbosity(logging.WARNING)  # Orbax logs every file operation at INFO
    cli.enable_compile_cache()
    interrupts.sigterm_raises_interrupt()
    workdir = fv.workdir
    try:
        seeds = [int(s) for s in fv.seeds]
    except ValueError:
        return cli.report_error(f"--seeds {','.join(fv.seeds)}: expected integers, e.g. "
                                "--seeds 0,1,2", cli.EXIT_USAGE)
    try:
        config = fv.config  # a config file that failed to load raises here
        cli.maybe_initialize_distributed(fv.coordinator, fv.num_processes, fv.process_id)
        from ddgjax.training import train, train_seeds

        options = dict(stop_after_epochs=fv.stop_after_epochs or None, verbose=not fv.quiet,
                       restart=fv.restart)
        if seeds:
            summary = train_seeds(config, workdir, seeds, **options)
        else:
            summary = train(config, workdir, **options)
    except KeyboardInterrupt as e:
        print(str(e) or "interrupted", file=sys.stderr)
        return interrupts.EXIT_INTERRUPTED
    except cli.user_errors() as e:
        return cli.report_error(e)
    if seeds:
        best = ", ".join(f"{s}: {r['best_loss']:.5f}" for s, r in zip(seeds, summary["runs"]))
        print(f"trained {len(seeds)} seeds for {summary['epochs']} epochs ({summary['steps']} "
              f"steps each) in {summary['seconds']:.1f} s; best training loss by seed {best}; "
              f"runs in {os.path.join(workdir, 'seed_<S>')}")
        return 0
    print(f"trained {summary['epochs']} epochs ({summary['steps']} steps) in "
          f"{summary['seconds']:.1f} s; best training loss {summary['best_loss']:.5f}; "
          f"checkpoints in {os.path.join(workdir, 'checkpoints')}")
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
