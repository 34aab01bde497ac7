"""Training: the jitted step (``step``), the host loop (``loop``, ``runs``, ``chunks``) and
several seeds in one program (``seeds``).

Data flows one way: padded training split -> batch indices planned on the host
(``chunks``) -> the data-parallel jitted step (``step``) -> losses and states back on the
host at checkpoint boundaries (``loop``, ``runs``: logs, model selection, checkpoints).
"""
from ddgjax.training.chunks import progress_piece_steps
from ddgjax.training.loop import (CALLS_IN_FLIGHT, TrainingInterrupted, interrupted_message,
                                  train)
from ddgjax.training.runs import (TrainingError, check_finite, restore_or_init, run_base_key,
                                  run_root_key)
from ddgjax.training.seeds import seed_workdir, train_seeds
from ddgjax.training.step import (TrainState, ema_update, graph_keys, init_state,
                                  make_optimizer, make_train_chunk, make_train_chunk_seeds)

__all__ = ["CALLS_IN_FLIGHT", "TrainState", "TrainingError", "TrainingInterrupted",
           "check_finite", "ema_update", "graph_keys", "init_state", "interrupted_message",
           "make_optimizer", "make_train_chunk", "make_train_chunk_seeds",
           "progress_piece_steps", "restore_or_init", "run_base_key", "run_root_key",
           "seed_workdir", "train", "train_seeds"]
