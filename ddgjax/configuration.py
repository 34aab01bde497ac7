"""Finding configs by name, and checks of a run configuration no single component owns.

Bundled configs (the files of the repository's ``configs/``, installed as
``ddgjax.configs``) have names: ``default``, ``quickstart``, ``test``, every paper
experiment as ``DATASET_MODEL_LOSS[_OPTION]`` (``ego_small_ppgn_simple``, from
``configs/paper.py``) and our best recipes as ``best_DATASET`` (``configs/best.py``).
:func:`resolve_config_arg` turns a name or a path into the ``FILE[:ARG]`` text the
``--config`` flag loads; :func:`get_config` returns the config itself.

The model (``ddgjax.models.model_from_config``) and the noise process
(``ddgjax.processes.process_from_config``) check their own fields; this module
checks the training and data fields, so a bad value is a one-line error that
names the field before anything is built.
"""
from __future__ import annotations

import importlib.util
import numbers
import os


class ConfigError(ValueError):
    """A configuration value no run could use; the message names the field."""


# Bundled configs that are whole files (no argument after the colon).
PLAIN_CONFIGS = ("default", "quickstart", "test")


def bundled_config_dir() -> str:
    """The directory of the bundled config files (``configs/`` of the repository)."""
    import ddgjax.configs

    return os.path.dirname(os.path.abspath(ddgjax.configs.__file__))


def bundled_configs() -> dict[str, tuple[str, str | None]]:
    """Name -> ``(file in bundled_config_dir(), argument of its get_config or None)``."""
    from ddgjax.configs import best, paper

    names = {name: (f"{name}.py", None) for name in PLAIN_CONFIGS}
    for spec in paper.all_specs():
        names[spec.replace(",", "_")] = ("paper.py", spec)
    for dataset in getattr(best, "RECIPES", {}):
        names[f"best_{dataset}"] = ("best.py", dataset)
    return names


def resolve_config_arg(text: str) -> str:
    """``--config`` text -> ``FILE[:ARG]`` of an existing config file.

    ``text`` is a config file path, optionally with ``:ARG`` for its
    ``get_config`` (``configs/paper.py:ego_small,ppgn,simple``), or a bundled
    config name (``ego_small_ppgn_simple``). Raises ConfigError (one line) for
    neither.
    """
    names = bundled_configs()
    if text in names:  # a name wins over a file of that name (write ./NAME for the file)
        fname, name_arg = names[text]
        full = os.path.join(bundled_config_dir(), fname)
        return f"{full}:{name_arg}" if name_arg else full
    path, sep, arg = text.partition(":")
    if os.path.isfile(os.path.expanduser(path)):
        return text
    if path.endswith(".py") or os.sep in path or "/" in path:
        raise ConfigError(f"--config {text}: config file {path} not found")
    raise ConfigError(
        f"--config {text}: neither a config file nor a bundled config; bundled: "
        f"{', '.join(PLAIN_CONFIGS)}, DATASET_MODEL_LOSS (e.g. ego_small_ppgn_simple; "
        f"all: {', '.join(n for n in names if n not in PLAIN_CONFIGS)})")


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


# How an epoch orders the size buckets' steps (config.data.bucket_order): "random"
# interleaves them in a seeded order, one jitted call per step; "sizes" runs them bucket by
# bucket in size order, the same in every epoch, so a chunk of epochs is one program (and
# several seeds in one program share it). docs/method.md, "Size buckets".
BUCKET_ORDERS = ("random", "sizes")


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
        (t.get("weight_decay", 0.0) >= 0, "train.weight_decay", ">= 0 (0: Adam)"),
        (t.checkpoint_every_epochs >= 1, "train.checkpoint_every_epochs", ">= 1"),
        (t.get("log_every_epochs", 1) >= 1, "train.log_every_epochs", ">= 1"),
        (config.diffusion.num_timesteps >= 1, "diffusion.num_timesteps", "a positive integer"),
        (config.data.max_nodes >= 0, "data.max_nodes", ">= 0 (0: automatic)"),
    ]
    parse_buckets(config.data.get("buckets", ""))
    order = config.data.get("bucket_order", "random")
    if order not in BUCKET_ORDERS:
        raise ConfigError(f"config.data.bucket_order: expected one of {BUCKET_ORDERS}, "
                          f"got {order!r}")
    for ok, field, expected in checks:
        if not ok:
            raise ConfigError(f"config.{field}: expected {expected}")
    for key in ("walk_features", "spectral_features"):
        count = int(config.model.get("ppgn", {}).get(key, 0))
        if count < 0:
            raise ConfigError(f"config.model.ppgn.{key}: expected >= 0 (0: none), got {count}")
        if count:
            from ddgjax.processes import binary_denoiser_input
            if not binary_denoiser_input(config):
                # walks and Laplacians need a 0/1 graph; the Gaussian baseline's x_t is signed
                raise ConfigError(f"config.model.ppgn.{key}: only with a process that "
                                  "denoises a 0/1 graph (the discrete one, not the Gaussian "
                                  "baseline)")
    problem = pad_multiple_problem(config.model.get("ppgn", {}).get("pad_multiple", 1),
                                   config.model.name)
    if problem:
        raise ConfigError(f"config.model.ppgn.pad_multiple: {problem}")
    dropout = float(config.model.get("ppgn", {}).get("dropout", 0.0))
    if not 0.0 <= dropout < 1.0:
        raise ConfigError(f"config.model.ppgn.dropout: expected a value in [0, 1), got {dropout}")
    if dropout > 0.0 and config.model.name != "ppgn":
        raise ConfigError("config.model.ppgn.dropout: only for PPGN (config.model.name)")
    for field, what in (("fp8_weights", "weights"), ("fp8_activations", "block outputs")):
        if config.model.get("ppgn", {}).get(field, False) and config.model.name != "ppgn":
            raise ConfigError(f"config.model.ppgn.{field}: only for PPGN (config.model.name), "
                              f"whose {what} the float8 sampling kernels round")
    if config.model.get("ppgn", {}).get("self_condition", False):
        from ddgjax.processes import binary_denoiser_input
        if config.model.name != "ppgn" or not binary_denoiser_input(config):
            raise ConfigError("config.model.ppgn.self_condition: only for PPGN with the "
                              "discrete process (not EDP-GNN, not the Gaussian baseline)")
    if config.diffusion.get("continuous_time", False) and config.model.name not in ("ppgn", "gt"):
        # EDP-GNN conditions on the level index, which continuous time does not have.
        raise ConfigError("config.diffusion.continuous_time: only for PPGN or the graph "
                          "transformer (gt) with the 'simple' loss")


def parse_buckets(value) -> int | tuple[int, ...]:
    """``config.data.buckets`` -> 0 (off), ``K`` (that many quantile buckets of the
    training node counts) or an ascending tuple of bucket sizes (largest node count each
    bucket holds).

    The config field is a string, so that it survives the command line and
    ``config.json`` alike: ``""`` or ``"0"`` (off), ``"4"`` (K = 4), ``"64,96,128,187"``
    (explicit sizes; a single size needs a trailing comma, ``"128,"``). An int, list or
    tuple is read the same way. Raises ConfigError naming the field for anything else.
    """
    bad = ConfigError(f"config.data.buckets: expected '' (off), a number of quantile buckets "
                      f"('4') or comma-separated bucket sizes ('64,96,128,187'), got {value!r}")
    if value is None or isinstance(value, bool):
        if value:
            raise bad
        return 0
    if isinstance(value, str):
        text = value.strip().strip("()[]").strip()
        if not text:
            return 0
        if "," not in text:
            value = text
        else:
            value = [v for v in (p.strip() for p in text.split(",")) if v]
            if not value:
                raise bad
    try:
        if isinstance(value, (list, tuple)):
            sizes = [int(v) for v in value]
            if any(str(v).strip() != str(int(v)) for v in value if isinstance(v, str)):
                raise ValueError
            if any(n < 1 for n in sizes) or not sizes:
                raise bad
            return tuple(sorted(set(sizes)))
        k = int(value)
        if isinstance(value, float) and k != value:
            raise ValueError
    except (TypeError, ValueError):
        raise bad from None
    if k < 0:
        raise bad
    return k
