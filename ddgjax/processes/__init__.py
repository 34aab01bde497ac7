"""Noise processes: the interface (``base``), its implementations and the registry.

* ``base``: ``NoiseProcess`` (``loss``, ``sampler``), ``Sampler``, ``LossOutput``
  and the per-graph plumbing the processes share.
* ``bitflip``: the paper's discrete process (bit flips with probability
  beta_bar_t): schedules, transitions, losses, samplers, the likelihood bound and
  graph completion.
* ``gaussian``: the continuous-state DDPM baseline.

``process_from_config`` is the one place that reads ``config.diffusion.kind``.

Example::

    process = process_from_config(config)
    out = process.loss(denoise_fn, keys, adj0, node_mask)        # LossOutput
    sample = process.sampler(num_steps=16)                       # hashable Sampler
    adj = sample(denoise_fn, keys, node_mask)                    # [B, N, N] 0/1
"""
from __future__ import annotations

from ddgjax.processes import bitflip, gaussian
from ddgjax.processes.base import DenoiseFn, LossOutput, NoiseProcess, Sampler
from ddgjax.processes.bitflip import BitFlipProcess
from ddgjax.processes.gaussian import GaussianProcess

# config.diffusion.kind -> the module of that process: from_config(config) builds it,
# fit_to_data(config, adj, node_mask) fills in config values that come from the data.
REGISTRY = {
    "discrete": bitflip,
    "gaussian": gaussian,
}


def _process_module(config):
    """The module of the process ``config.diffusion.kind`` names (``"discrete"`` if absent);
    the one place that reads the kind."""
    kind = config.diffusion.get("kind", "discrete")
    if kind not in REGISTRY:
        raise ValueError(f"config.diffusion.kind: expected one of {sorted(REGISTRY)}, "
                         f"got {kind!r}")
    return REGISTRY[kind]


def process_from_config(config) -> NoiseProcess:
    """The noise process ``config.diffusion.kind`` names (``"discrete"`` if absent).

    Raises ValueError naming the config field for an unknown kind or a value the
    process cannot use.
    """
    return _process_module(config).from_config(config)


def fit_to_data(config, adj, node_mask):
    """``config`` with the process's data-dependent values set from the padded training
    split ``adj [G, N, N]``, ``node_mask [G, N]`` (e.g. the marginal prior's edge
    density); values already set are kept. Returns ``config`` itself if nothing changes."""
    return _process_module(config).fit_to_data(config, adj, node_mask)


__all__ = ["BitFlipProcess", "DenoiseFn", "GaussianProcess", "LossOutput", "NoiseProcess",
           "REGISTRY", "Sampler", "fit_to_data",
           "process_from_config"]
