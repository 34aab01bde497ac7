"""Finding configs by name, upgrading the configs of older runs, and the checks of a run
configuration that no single component owns.

Bundled configs (the files of the repository's ``configs/``, installed as
``ddgjax.configs``) have names: ``default``, ``quickstart``, ``test``, one config per
benchmark dataset (``spectre_planar_64``, ``planar_60``, ...: our best recipe, its sampler
included), and the paper's experiments as ``paper:DATASET,MODEL,LOSS[,OPTION]`` (or
``DATASET_MODEL_LOSS[_OPTION]``, e.g. ``ego_small_ppgn_simple``; ``configs/paper.py``).
:func:`resolve_config_arg` turns a name or a path into the ``FILE[:ARG]`` text the
``--config`` flag loads; :func:`get_config` returns the config itself.

:func:`upgrade_run_config` reads the ``config.json`` of a run written by an earlier
version: renamed keys are renamed, keys of removed levers are dropped where the run had
them off, and a run that used one is refused in one line.

The model (``ddgjax.models.model_from_config``) and the noise process
(``ddgjax.processes.process_from_config``) check their own fields; this module
checks the training and data fields, so a bad value is a one-line error that
names the field before anything is built.
"""
from __future__ import annotations

import importlib.util
import numbers
import os

from ddgjax.buckets import parse_buckets


class ConfigError(ValueError):
    """A configuration value no run could use; the message names the field."""


# Bundled configs that are whole files (no argument after the colon).
PLAIN_CONFIGS = ("default", "quickstart", "test")
# One config per benchmark dataset: our best recipe, its sampler and checkpoint included.
DATASET_CONFIGS = ("community_small", "ego_small", "sbm_27", "planar_60", "spectre_planar_64",
                   "spectre_sbm", "spectre_comm20", "planar_l", "sbm_l", "lobster_l")
# Conditional generation (config.condition): a model of several families, one of SBM graphs
# asked for by their number of communities.
CONDITIONAL_CONFIGS = ("families", "sbm_communities")
PAPER_PREFIX = "paper:"


def bundled_config_dir() -> str:
    """The directory of the bundled config files (``configs/`` of the repository)."""
    import ddgjax.configs

    return os.path.dirname(os.path.abspath(ddgjax.configs.__file__))


def bundled_configs() -> dict[str, tuple[str, str | None]]:
    """Name -> ``(file in bundled_config_dir(), argument of its get_config or None)``."""
    from ddgjax.configs import paper

    names = {name: (f"{name}.py", None)
             for name in PLAIN_CONFIGS + DATASET_CONFIGS + CONDITIONAL_CONFIGS}
    for spec in paper.all_specs():
        names[spec.replace(",", "_")] = ("paper.py", spec)
    return names


def resolve_config_arg(text: str) -> str:
    """``--config`` text -> ``FILE[:ARG]`` of an existing config file.

    ``text`` is a bundled config name (``spectre_planar_64``, ``ego_small_ppgn_simple``),
    ``paper:SPEC`` (``paper:planar_60,ppgn,simple``), or a config file path, optionally
    with ``:ARG`` for its ``get_config`` (``configs/paper.py:ego_small,ppgn,simple``).
    Raises ConfigError (one line) for none of these.
    """
    names = bundled_configs()
    if text in names:  # a name wins over a file of that name (write ./NAME for the file)
        fname, name_arg = names[text]
        full = os.path.join(bundled_config_dir(), fname)
        return f"{full}:{name_arg}" if name_arg else full
    if text.startswith(PAPER_PREFIX):
        return f"{os.path.join(bundled_config_dir(), 'paper.py')}:{text[len(PAPER_PREFIX):]}"
    path, sep, arg = text.partition(":")
    if os.path.isfile(os.path.expanduser(path)):
        return text
    if path.endswith(".py") or os.sep in path or "/" in path:
        raise ConfigError(f"--config {text}: config file {path} not found")
    raise ConfigError(
        f"--config {text}: neither a config file nor a bundled config; bundled: "
        f"{', '.join(PLAIN_CONFIGS + DATASET_CONFIGS + CONDITIONAL_CONFIGS)}, or "
        f"paper:DATASET,MODEL,LOSS "
        f"(e.g. paper:ego_small,ppgn,simple)")


def load_config_file(path: str, arg: str | None = None):
    """Execute config file ``path`` and return its ``get_config(arg)`` (or ``get_config()``)."""
    name = "ddgjax_config_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ConfigError(f"{path}: a config file must define get_config()")
    return module.get_config(arg) if arg is not None else module.get_config()


def get_config(name_or_path: str):
    """The config of a bundled name or a ``FILE[:ARG]`` path, as a locked ConfigDict.

    Locked: existing fields can be changed (``cfg.train.num_epochs = 10``), a
    misspelt new one is an error. Raises ConfigError for an unknown name or a
    missing file, ValueError for a bad argument (e.g. a paper spec).
    """
    path, sep, arg = resolve_config_arg(name_or_path).partition(":")
    config = load_config_file(path, arg if sep else None)
    config.lock()
    return config


def pad_multiple_problem(value, model_name: str) -> str | None:
    """What is wrong with ``value`` as ``config.model.ppgn.pad_multiple`` for a model named
    ``model_name`` (None: nothing): an integer >= 1, above 1 only for PPGN. Training's
    config check and sampling's override both ask this."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        return f"expected an integer >= 1 (1: no padding), got {value!r}"
    if value > 1 and model_name != "ppgn":
        return (f"only for PPGN (config.model.name): the padding exists for the PPGN only, "
                f"not {model_name!r}")
    return None


def validate_config(config) -> None:
    """Raise ConfigError naming the field for values no training step could use."""
    t = config.train
    checks = [
        (t.batch_size >= 1, "train.batch_size", "a positive integer"),
        (t.num_epochs >= 1, "train.num_epochs", "a positive integer"),
        (t.lr > 0, "train.lr", "a positive number"),
        (0 < t.lr_decay_per_epoch <= 1, "train.lr_decay_per_epoch", "in (0, 1]"),
        (0 <= t.ema_decay < 1, "train.ema_decay", "in [0, 1)"),
        (t.checkpoint_every_epochs >= 1, "train.checkpoint_every_epochs", ">= 1"),
        (config.diffusion.num_timesteps >= 1, "diffusion.num_timesteps", "a positive integer"),
        (config.data.max_nodes >= 0, "data.max_nodes", ">= 0 (0: automatic)"),
        (config.data.bucket_max_batch >= 0, "data.bucket_max_batch", ">= 0 (0: no cap)"),
    ]
    for ok, field, expected in checks:
        if not ok:
            raise ConfigError(f"config.{field}: expected {expected}")
    parse_buckets(config.data.buckets)
    problem = pad_multiple_problem(config.model.ppgn.pad_multiple, config.model.name)
    if problem:
        raise ConfigError(f"config.model.ppgn.pad_multiple: {problem}")
    if config.sample.checkpoint not in CHECKPOINTS:
        raise ConfigError(f"config.sample.checkpoint: expected one of {CHECKPOINTS}, got "
                          f"{config.sample.checkpoint!r}")
    if config.diffusion.continuous_time and config.model.name != "ppgn":
        # EDP-GNN conditions on the level index, which continuous time does not have.
        raise ConfigError("config.diffusion.continuous_time: only for PPGN with the 'simple' "
                          "loss")


# The checkpoints a run keeps: the lowest training loss, the last, the best samples.
CHECKPOINTS = ("best", "latest", "best_val")

# Keys that runs written by ddgjax 0.1 may hold and this version does not have, with the
# value that meant "off". A run that had one of them off loads as if the key never existed;
# one that had it on was trained or sampled with a lever we measured and removed
# (docs/results.md, "Every lever tried") and is refused in one line.
REMOVED_LEVERS = {
    "data.seed": 0, "data.bucket_order": "random",
    "model.ppgn.walk_features": 0, "model.ppgn.spectral_features": 0,
    "model.ppgn.self_condition": False, "model.ppgn.dropout": 0.0, "model.ppgn.film": False,
    "model.ppgn.norm": "instance", "model.ppgn.fp8_weights": False,
    "model.ppgn.fp8_activations": False,
    "diffusion.schedule": "linear", "diffusion.simple_weighting": "bond_taylor",
    "diffusion.unroll_prob": 0.0, "diffusion.gaussian.schedule": "cosine",
    "diffusion.gaussian.clip_x0": True,
    "train.grad_clip": 0.0, "train.weight_decay": 0.0,
    "sample.argmax_last": False, "sample.final_pass": False, "sample.alg1_below": 0.0,
    "sample.alg2_below": 0.0, "sample.logit_scale_above": 0.0, "sample.target_guidance": 0.0,
}
# Keys of 0.1 that changed how a run was computed, not what it computes (the same
# function and process up to float rounding, or the training loop's bookkeeping): dropped
# whatever their value.
DROPPED_SETTINGS = ("train.b1", "train.b2", "train.flat_update", "train.precompile",
                    "train.concurrent_kernels", "train.log_every_epochs",
                    "validation.num_steps", "validation.num_reference")
RELEASE_WITH_LEVERS = "ddgjax 0.1.0 (commit 4c1a513)"


def upgrade_run_config(tree: dict, where: str) -> dict:
    """The recorded config ``tree`` (``config.json`` of a run, nested dicts) in today's keys.

    ``model.ppgn.fused``/``pallas`` become ``model.ppgn.kernels``; the keys of
    :data:`REMOVED_LEVERS` at their off value and those of :data:`DROPPED_SETTINGS` are
    dropped, as is the section of the removed graph transformer (``model.gt``). Raises
    ConfigError naming ``where`` (the file) and the key for a run that used a removed
    lever, or for a key this version does not know. Keys the run lacks are not filled in
    here (:func:`complete_run_config` does that).
    """
    flat = _flatten(tree)
    name = flat.get("model.name", "ppgn")
    if name == "gt":
        raise ConfigError(f"{where}: model.name = 'gt', the graph transformer, was removed "
                          f"(measured far below the PPGN); use {RELEASE_WITH_LEVERS} for this "
                          "run")
    flat = {k: v for k, v in flat.items() if not k.startswith("model.gt.")}
    fused, pallas = flat.pop("model.ppgn.fused", None), flat.pop("model.ppgn.pallas", None)
    if "model.ppgn.kernels" not in flat and (fused is not None or pallas is not None):
        flat["model.ppgn.kernels"] = "pallas" if pallas else "xla"
    for key in DROPPED_SETTINGS:
        flat.pop(key, None)
    for key, off in REMOVED_LEVERS.items():
        if key in flat and flat.pop(key) != off:
            raise ConfigError(
                f"{where}: {key} = {_flatten_value(tree, key)!r} is a lever this version "
                f"removed (measured no better: docs/results.md, 'Every lever tried'); use "
                f"{RELEASE_WITH_LEVERS} for this run")
    known = set(_flatten(_default_tree()))
    unknown = sorted(k for k in flat if k not in known)
    if unknown:
        raise ConfigError(f"{where}: unknown config key {unknown[0]} (this version's keys are "
                          "those of configs/default.py)")
    return _unflatten(flat)


def complete_run_config(tree: dict, where: str):
    """:func:`upgrade_run_config`, then every key the run lacks filled in from
    ``configs/default.py``: the run's config as a ConfigDict with today's keys."""
    import ml_collections

    config = ml_collections.ConfigDict(_default_tree())
    config.update_from_flattened_dict(_flatten(upgrade_run_config(tree, where)))
    return config


def _default_tree() -> dict:
    from ddgjax.configs import default

    return default.get_config().to_dict()


def _flatten(tree, prefix: str = "") -> dict:
    if hasattr(tree, "to_dict"):
        tree = tree.to_dict()
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _flatten_value(tree, key: str):
    return _flatten(tree)[key]


def _unflatten(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out
