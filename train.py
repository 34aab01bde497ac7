"""Train a graph diffusion model (``ddgjax.training.train`` does the work).

    python train.py --config configs/paper.py:community_small,ppgn,simple --workdir runs/cs
    python train.py --config configs/test.py --workdir /tmp/t --config.train.num_epochs=10

Resumes from ``--workdir`` when it holds a checkpoint. Multi-host: pass
``--coordinator host:port --num_processes P --process_id i`` on each host (or
let a cluster environment set it up).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from absl import app, flags, logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "Training config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs and config.")
_STOP = flags.DEFINE_integer("stop_after_epochs", 0,
                             "Stop after this many epochs of this invocation (0: run to the end).")
_COORD = flags.DEFINE_string("coordinator", "", "Multi-host coordinator address host:port.")
_NPROC = flags.DEFINE_integer("num_processes", 0, "Multi-host: number of processes.")
_PID = flags.DEFINE_integer("process_id", -1, "Multi-host: this process's id.")
_QUIET = flags.DEFINE_bool("quiet", False, "No progress bar.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    logging.set_verbosity(logging.WARNING)  # Orbax logs every file operation at INFO
    from ddgjax import cli

    try:
        cli.maybe_initialize_distributed(_COORD.value, _NPROC.value, _PID.value)
        from ddgjax.training import train

        summary = train(_CONFIG.value, _WORKDIR.value,
                                     stop_after_epochs=_STOP.value or None,
                                     verbose=not _QUIET.value)
    except cli.user_errors() as e:
        cli.fail(e)
    print(f"trained {summary['epochs']} epochs ({summary['steps']} steps) in "
          f"{summary['seconds']:.1f} s; best training loss {summary['best_loss']:.5f}; "
          f"checkpoints in {os.path.join(_WORKDIR.value, 'checkpoints')}")


if __name__ == "__main__":
    from ddgjax.cli import parse_flags

    app.run(main, flags_parser=parse_flags)
