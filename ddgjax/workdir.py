"""The record a training run leaves in its workdir, besides checkpoints.

* ``config.json``: the full configuration the run was trained with;
* ``dataset.json``: what sampling needs of the data (``max_nodes``, the training
  split's node-count distribution, split sizes, the source).

Both are written atomically, and only once a run has started well, so a failed
start never replaces the record of a good run. A run resumed in a workdir must
be the same run: :func:`check_same_run` compares the data, model and diffusion
settings with the record, and :func:`set_aside_previous_run` moves an old run
out of the way when a user asks to start over.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

import ml_collections

from ddgjax.configuration import complete_run_config
from ddgjax.reporting import write_json_atomic

CONFIG_FILE = "config.json"
DATASET_FILE = "dataset.json"
# What a training run writes into its workdir (moved aside as a whole on a restart).
RUN_ENTRIES = ("checkpoints", CONFIG_FILE, DATASET_FILE, "metrics.jsonl", "tensorboard", "samples",
               "completions")
# Config sections (or single keys) a resumed run must share with the run it resumes.
SAME_RUN_KEYS = ("data", "model", "diffusion", "train.batch_size", "train.seed")
# Keys under SAME_RUN_KEYS that change how a step is computed but not the run itself
# (the parameters and the process stay the same): a resume may change them.
RESUMABLE_CHANGES = ("model.ppgn.remat", "model.ppgn.kernels", "model.ppgn.pad_multiple",
                     "model.compute_dtype", "diffusion.gaussian.eta", "data.allow_pickle")
# The per-model config sections: only the one config.model.name picks is the run's model.
MODEL_SECTIONS = ("ppgn", "edp")
# Dataset-record fields that identify the training data.
SAME_DATA_FIELDS = ("max_nodes", "num_train", "train_digest", "data_digest")
# The data are compared by content (SAME_DATA_FIELDS), not by where they lie.
DATA_SOURCE_KEY = "data.source"


class WorkdirError(RuntimeError):
    """The workdir does not hold what was expected; the message names it."""


def write_run_record(workdir: str, config: ml_collections.ConfigDict, dataset: dict) -> None:
    """Write ``config.json`` and ``dataset.json`` into ``workdir`` (atomically)."""
    write_json_atomic(os.path.join(workdir, CONFIG_FILE), json.loads(config.to_json_best_effort()))
    write_json_atomic(os.path.join(workdir, DATASET_FILE), dataset)


def read_run_record(workdir: str) -> tuple[ml_collections.ConfigDict, dict]:
    """``(config, dataset record)`` of a trained run, its config in this version's keys
    (``configuration.complete_run_config``: a run written by an earlier version loads, one
    that used a removed lever raises ConfigError naming the key). Raises WorkdirError if
    the record is absent or not JSON."""
    if not os.path.isdir(workdir):
        raise WorkdirError(f"{workdir}: workdir not found")
    out = []
    for name in (CONFIG_FILE, DATASET_FILE):
        path = os.path.join(workdir, name)
        if not os.path.exists(path):
            raise WorkdirError(f"{workdir}: no trained run here ({name} is missing); run "
                               "ddgjax-train --workdir on it first")
        try:
            with open(path) as f:
                out.append(json.load(f))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise WorkdirError(f"{path}: not a valid JSON file ({e})") from e
    return complete_run_config(out[0], os.path.join(workdir, CONFIG_FILE)), out[1]


def ensure_writable_dir(path: str, what: str = "workdir") -> None:
    """Create directory ``path`` if needed and check that files can be written there.

    Raises WorkdirError naming the path (one line) otherwise.
    """
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise WorkdirError(f"{path}: cannot write to this {what} "
                           f"({e.strerror or type(e).__name__})") from e


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (a ConfigDict or nested dicts)."""
    if hasattr(tree, "to_dict"):
        tree = tree.to_dict()
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def run_differences(old_config: Any, old_dataset: dict, config: Any, dataset: dict) -> list[str]:
    """What makes a new run differ from the recorded one, as ``"key (old -> new)"`` texts.

    Compares the config keys under :data:`SAME_RUN_KEYS` that both configs have (a
    recorded config read by :func:`read_run_record` has them all), apart from
    :data:`RESUMABLE_CHANGES` and the sections of models the run does not use, and the
    dataset-record fields :data:`SAME_DATA_FIELDS` that both records have. The data are
    compared by content: ``data.source`` counts only where the content differs too (or
    cannot be compared), so a run whose data file moved resumes from its new path.
    """
    old_flat, new_flat = flatten(old_config), flatten(config)
    diffs = []
    names = {old_flat.get("model.name"), new_flat.get("model.name")}
    unused = tuple(f"model.{m}." for m in MODEL_SECTIONS if m not in names)
    for key in sorted(set(old_flat) & set(new_flat)):
        if key in RESUMABLE_CHANGES or key == DATA_SOURCE_KEY or key.startswith(unused):
            continue
        if any(key == k or key.startswith(k + ".") for k in SAME_RUN_KEYS):
            if not _same_value(old_flat[key], new_flat[key]):
                diffs.append(f"{key} ({old_flat[key]!r} -> {new_flat[key]!r})")
    config_diffs = len(diffs)
    for field in SAME_DATA_FIELDS:
        if field in old_dataset and field in dataset and old_dataset[field] != dataset[field]:
            if field.endswith("_digest"):
                what = "training graphs" if field == "train_digest" else "graphs"
                diffs.append(f"the {what} (their content differs)")
            else:
                diffs.append(f"dataset {field} ({old_dataset[field]!r} -> {dataset[field]!r})")
    old_source, new_source = old_flat.get(DATA_SOURCE_KEY), new_flat.get(DATA_SOURCE_KEY)
    by_content = any(f in old_dataset and f in dataset for f in ("train_digest", "data_digest"))
    if old_source != new_source and (len(diffs) > config_diffs or not by_content):
        diffs.insert(config_diffs, f"{DATA_SOURCE_KEY} ({old_source!r} -> {new_source!r})")
    return diffs


def _same_value(a: Any, b: Any) -> bool:
    """Equal, treating lists and tuples alike (JSON has no tuples)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def check_same_run(workdir: str, config: ml_collections.ConfigDict, dataset: dict) -> None:
    """Raise WorkdirError (one line naming the differing keys) if the run recorded in
    ``workdir`` used other data, another model or another diffusion process.

    A workdir without a record (an older or foreign layout) is not checked.
    """
    try:
        old_config, old_dataset = read_run_record(workdir)
    except WorkdirError:
        return
    diffs = run_differences(old_config, old_dataset, config, dataset)
    if diffs:
        raise WorkdirError(
            f"{workdir} holds a run with other settings; refusing to resume it with "
            f"{'; '.join(diffs)}. Pass --restart (train(..., restart=True)) to start over "
            "in this workdir (the old run is moved aside, not deleted), or use another --workdir")


def set_aside_previous_run(workdir: str) -> str | None:
    """Move what a previous run wrote (:data:`RUN_ENTRIES`) into ``workdir/replaced-<time>/``.

    Returns that directory, or None when there was nothing to move. Nothing is deleted.
    """
    present = [name for name in RUN_ENTRIES if os.path.lexists(os.path.join(workdir, name))]
    if not present:
        return None
    dest = os.path.join(workdir, time.strftime("replaced-%Y%m%d-%H%M%S"))
    suffix = 1
    while os.path.exists(dest):
        dest = os.path.join(workdir, time.strftime("replaced-%Y%m%d-%H%M%S") + f"-{suffix}")
        suffix += 1
    os.makedirs(dest)
    for name in present:
        os.rename(os.path.join(workdir, name), os.path.join(dest, name))
    return dest
