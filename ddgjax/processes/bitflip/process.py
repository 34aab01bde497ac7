"""The bit-flip process as a ``NoiseProcess``, and its adapter from the config (the
registry's ``"discrete"`` entry, ``ddgjax.processes``).

``from_config`` is the one place that reads the bit-flip keys of ``config.diffusion`` and
the sampler defaults of ``config.sample``; ``fit_to_data`` sets the marginal prior's edge
density from the training split.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from ddgjax.graphs import pair_mask
from ddgjax.processes.base import DenoiseFn, LossOutput, NoiseProcess, Sampler
from ddgjax.processes.bitflip.losses import LOSSES, TRAIN_GRIDS, training_loss
from ddgjax.processes.bitflip.sampler import LEVERS, SamplerLevers, sample_graphs_vmapped
from ddgjax.processes.bitflip.schedules import (SCHEDULES, NoiseSchedule, make_schedule,
                                                parse_grid, sampling_grid)
from ddgjax.processes.bitflip.transitions import ALGORITHMS

PRIORS = ("uniform", "marginal")


@dataclasses.dataclass(frozen=True)
class BitFlipSampler(Sampler):
    """Algorithm 1 or 2 over ``num_steps`` levels of a ``BitFlipProcess``
    (``sampler.sample_graphs``; hashable, so it keys compiled programs)."""

    process: "BitFlipProcess"
    num_steps: int
    algorithm: int
    return_chain: bool = False
    grid: str = "trained"
    levers: SamplerLevers = SamplerLevers()

    def __call__(self, denoise_fn: DenoiseFn, keys: jax.Array, node_mask: jax.Array):
        return sample_graphs_vmapped(denoise_fn, keys, node_mask, self.process.schedule,
                                     self.algorithm, self.num_steps, self.return_chain,
                                     grid=self.grid, rho=self.process.prior_density,
                                     levers=self.levers)

    @property
    def info(self) -> dict:
        return {"process": self.process.name, "num_steps": self.num_steps,
                "algorithm": self.algorithm, "grid": self.grid, **self.levers.as_dict()}


@dataclasses.dataclass(frozen=True)
class BitFlipProcess(NoiseProcess):
    """The paper's bit-flip diffusion as a ``NoiseProcess``.

    Attributes:
      schedule_name: ``"linear"`` (the paper) or ``"cosine"`` beta_bar schedule.
      num_timesteps: T, the trained levels.
      loss_type: ``"simple"`` (L_simple) or ``"vb"`` (L_vb).
      continuous_time: L_simple on continuous levels (``train_grid``) instead of the T
        levels.
      train_grid: with ``continuous_time``, how training draws ``beta_bar``:
        ``"uniform"`` (U(0, 1/2)) or ``"power:GAMMA"`` (``losses.training_levels``).
      prior_density: ``rho``, the edge probability of the prior ``A_T ~ ER(rho)``; 1/2
        is the paper's uniform prior, the training split's density the marginal prior.
      algorithm, grid, renoise_mix, logit_scale: the sampler's defaults (``sampler``):
        the reverse model (1 or 2), the visited levels (``schedules.sampling_grid``; off
        the trained grid needs ``continuous_time``) and the ``SamplerLevers``.
    """

    schedule_name: str = "linear"
    num_timesteps: int = 32
    loss_type: str = "simple"
    continuous_time: bool = False
    train_grid: str = "uniform"
    prior_density: float = 0.5
    algorithm: int = 2
    grid: str = "trained"
    renoise_mix: float = 0.0
    logit_scale: float = 1.0

    name = "discrete"
    sampler_options = ("algorithm", "grid") + LEVERS

    def __post_init__(self):
        if self.loss_type not in LOSSES:
            raise ValueError(f"config.diffusion.loss: unknown loss {self.loss_type!r}; "
                             f"expected one of {LOSSES}")
        if self.continuous_time and self.loss_type != "simple":
            raise ValueError("config.diffusion.continuous_time: only defined for the 'simple' loss")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"config.sample.algorithm: expected 1 or 2 (0: by loss), "
                             f"got {self.algorithm!r}")
        if self.schedule_name not in SCHEDULES:
            raise ValueError(f"config.diffusion.schedule: unknown schedule "
                             f"{self.schedule_name!r}; expected one of {SCHEDULES}")
        make_schedule(self.schedule_name, self.num_timesteps)  # validates T
        self._check_grid(self.grid)
        try:
            train_kind = parse_grid(self.train_grid)[0]
        except ValueError:
            train_kind = None
        if train_kind not in ("uniform", "power"):
            raise ValueError(f"config.diffusion.train_grid: expected one of {TRAIN_GRIDS} "
                             f"(GAMMA > 0), got {self.train_grid!r}")
        if self.train_grid != "uniform" and not self.continuous_time:
            raise ValueError("config.diffusion.train_grid: a training grid other than 'uniform' "
                             "needs config.diffusion.continuous_time=True")
        if not 0.0 < self.prior_density < 1.0:
            raise ValueError(f"config.diffusion.prior_density: expected a value in (0, 1), got "
                             f"{self.prior_density} (0 means: set from the training data)")
        try:
            self.levers.check_algorithm(self.algorithm)
        except ValueError as e:
            raise ValueError(f"config.sample.{e}") from None

    def _check_grid(self, grid: str) -> None:
        if parse_grid(grid)[0] != "trained" and not self.continuous_time:
            raise ValueError(f"sampling grid {grid!r} needs a model trained in continuous time "
                             "(config.diffusion.continuous_time); this one knows only its "
                             f"{self.num_timesteps} trained levels: use grid 'trained'")

    @property
    def schedule(self) -> NoiseSchedule:
        return make_schedule(self.schedule_name, self.num_timesteps)

    @property
    def levers(self) -> SamplerLevers:
        """The sampler's default levers (the process's fields of those names)."""
        return SamplerLevers(**{name: getattr(self, name) for name in LEVERS})

    def loss(self, denoise_fn: DenoiseFn, keys: jax.Array, adj0: jax.Array,
             node_mask: jax.Array) -> LossOutput:
        return training_loss(denoise_fn, keys, adj0, node_mask, self.schedule, self.loss_type,
                             self.continuous_time, self.prior_density, self.train_grid)

    def sampler(self, num_steps: int | None = None, return_chain: bool = False,
                **options) -> BitFlipSampler:
        """A sampler over ``num_steps`` levels (None: T). ``options`` override the process's
        defaults: ``algorithm`` (1 or 2; None or 0: the default, as
        ``config.sample.algorithm = 0`` means "by loss"), ``grid``, ``renoise_mix`` and
        ``logit_scale`` (``sampler.sample_graphs``). ValueError naming the option for a
        value it cannot take."""
        self.check_sampler_options(options)
        opt = lambda name: getattr(self, name) if options.get(name) is None else options[name]
        algorithm = opt("algorithm") or self.algorithm
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown sampling algorithm {algorithm!r}; expected one of "
                             f"{ALGORITHMS}")
        grid = str(opt("grid") or self.grid)
        self._check_grid(grid)
        num_steps = int(num_steps or self.num_timesteps)
        sampling_grid(self.schedule, num_steps, grid)  # validates num_steps
        levers = SamplerLevers(**{name: opt(name) for name in LEVERS})
        levers.check_algorithm(int(algorithm))
        return BitFlipSampler(self, num_steps, int(algorithm), bool(return_chain), grid, levers)


def default_algorithm(loss_type: str) -> int:
    """The paper's pairing: Algorithm 1 for L_vb, Algorithm 2 for L_simple."""
    return 1 if loss_type == "vb" else 2


def from_config(config) -> BitFlipProcess:
    """The bit-flip process of ``config.diffusion`` (the paper's linear schedule) with the
    sampler defaults of ``config.sample`` (``algorithm`` 0: by loss; keys a run config
    written before they existed take their defaults)."""
    d = config.diffusion
    s = config.sample
    return BitFlipProcess(num_timesteps=int(d.num_timesteps), loss_type=d.loss,
                          continuous_time=bool(d.get("continuous_time", False)),
                          train_grid=str(d.get("train_grid", "uniform")),
                          prior_density=prior_density(d),
                          algorithm=int(s.get("algorithm", 0) or default_algorithm(d.loss)),
                          grid=str(s.get("grid", "trained")),
                          renoise_mix=float(s.get("renoise_mix", 0.0)),
                          logit_scale=float(s.get("logit_scale", 1.0)))


def prior_density(diffusion_cfg) -> float:
    """``rho`` of ``config.diffusion``: 1/2 for the uniform prior, ``prior_density`` for
    the marginal one (ValueError if unknown or not yet set from the data)."""
    prior = diffusion_cfg.get("prior", "uniform")
    if prior not in PRIORS:
        raise ValueError(f"config.diffusion.prior: expected one of {PRIORS}, got {prior!r}")
    if prior == "uniform":
        return 0.5
    rho = float(diffusion_cfg.get("prior_density", 0.0))
    if rho == 0.0:
        raise ValueError("config.diffusion.prior_density: the marginal prior needs the edge "
                         "density; training sets it from the training split "
                         "(ddgjax.processes.fit_to_data)")
    return rho


def fit_to_data(config, adj: np.ndarray, node_mask: np.ndarray):
    """``config`` with ``diffusion.prior_density`` set to the edge density of the real
    strict-upper pairs of ``adj [G, N, N]`` where the marginal prior asks for it (else
    ``config`` itself)."""
    d = config.diffusion
    if d.get("prior", "uniform") != "marginal" or float(d.get("prior_density", 0.0)) != 0.0:
        return config
    pairs = pair_mask(np.asarray(node_mask))
    density = float(np.asarray(adj)[pairs].sum() / max(pairs.sum(), 1))
    config = config.copy_and_resolve_references()
    config.diffusion.prior_density = density
    return config
