"""The record a training run leaves in its workdir, besides checkpoints.

* ``config.json``: the full configuration the run was trained with;
* ``dataset.json``: what sampling needs of the data (``max_nodes``, the training
  split's node-count distribution, split sizes, the source).

Both are written atomically, and only once a run has started well, so a failed
start never replaces the record of a good run.
"""
from __future__ import annotations

import json
import os

import ml_collections

from ddgjax.reporting import write_json_atomic

CONFIG_FILE = "config.json"
DATASET_FILE = "dataset.json"


class WorkdirError(RuntimeError):
    """The workdir does not hold what was expected; the message names it."""


def write_run_record(workdir: str, config: ml_collections.ConfigDict, dataset: dict) -> None:
    """Write ``config.json`` and ``dataset.json`` into ``workdir`` (atomically)."""
    write_json_atomic(os.path.join(workdir, CONFIG_FILE), json.loads(config.to_json_best_effort()))
    write_json_atomic(os.path.join(workdir, DATASET_FILE), dataset)


def read_run_record(workdir: str) -> tuple[ml_collections.ConfigDict, dict]:
    """``(config, dataset record)`` of a trained run. Raises WorkdirError if absent."""
    if not os.path.isdir(workdir):
        raise WorkdirError(f"{workdir}: workdir not found")
    out = []
    for name in (CONFIG_FILE, DATASET_FILE):
        path = os.path.join(workdir, name)
        if not os.path.exists(path):
            raise WorkdirError(f"{workdir}: no trained run here ({name} is missing); run "
                               "train.py --workdir on it first")
        try:
            with open(path) as f:
                out.append(json.load(f))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise WorkdirError(f"{path}: not a valid JSON file ({e})") from e
    return ml_collections.ConfigDict(out[0]), out[1]
