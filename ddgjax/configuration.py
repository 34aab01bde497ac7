"""Checks of a run configuration that no single component owns.

The model (``ddgjax.models.model_from_config``) and the noise process
(``ddgjax.processes.process_from_config``) check their own fields; this module
checks the training and data fields, so a bad value is a one-line error that
names the field before anything is built.
"""
from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value no run could use; the message names the field."""


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
    ]
    for ok, field, expected in checks:
        if not ok:
            raise ConfigError(f"config.{field}: expected {expected}")
    if config.diffusion.get("continuous_time", False) and config.model.name != "ppgn":
        # EDP-GNN conditions on the level index, which continuous time does not have.
        raise ConfigError("config.diffusion.continuous_time: only for PPGN with the 'simple' loss")
