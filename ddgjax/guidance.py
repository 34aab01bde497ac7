"""Autoguidance: sample a trained run guided by a weaker run of the same process.

Karras et al. 2024 ("Guiding a diffusion model with a bad version of itself") steer a
denoiser away from the errors of a weaker model trained on the same data (smaller,
or trained for less long): with guidance weight ``w >= 0`` the sampler uses

    out = good + w * (good - bad)

for the denoiser's output (bit flips: the logits of ``p_theta(a_0 = 1 | A_t)``; the
Gaussian baseline: the noise estimate). ``w = 0`` is the good model alone, and a run
guided by itself is the run alone, at any weight. Each sampling step costs both models'
forward passes; the number of steps is unchanged.

Negative weights down to -1 blend the two runs instead: ``(1 + w) good - w other``, so
``w = -1/2`` samples with the mean of both outputs (an ensemble of two runs of the same
process) and ``w = -1`` with the other run's output.

A guidance interval (Kynkäänniemi et al. 2024, "Applying guidance in a limited interval
improves sample and distribution quality"): with ``above > 0`` (bit flips only) the weight
applies only in the steps whose noise level ``beta_bar_t`` is at least ``above``; below
it the good model samples alone.

The weight and the interval travel with the parameters (float32 scalars), so trying
several of them compiles the sampler once per guide architecture.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp

from ddgjax.sampling import Run, SamplingError, load_run

# process fields that fix what a denoiser's output means; the two runs must agree on them
PROCESS_FIELDS = ("schedule_name", "num_timesteps", "continuous_time", "prior_density",
                  "self_condition")


@dataclasses.dataclass(frozen=True)
class AutoGuidedDenoiser:
    """A denoiser with the ``model.apply`` interface the samplers call.

    ``apply(params, adj_t, node_mask, t, level, *estimate)`` with ``params =
    {"model": ..., "guide": ..., "weight": float32 [], "above": float32 []}`` and the
    per-graph noise level ``level [B]`` (bit flips: ``beta_bar_t``) returns
    ``good + w_b * (good - bad)`` in float32, ``w_b = weight`` for the graphs with
    ``level >= above`` and 0 for the others, ``good`` and ``bad`` being the two models'
    outputs (``[B, N, N]`` for the bit-flip denoisers) on the same inputs. Hashable (two
    Flax modules), so ``sampling.compiled_sampler`` caches it.
    """

    model: Any
    guide: Any

    def apply(self, params, *inputs):
        good = self.model.apply(params["model"], *inputs).astype(jnp.float32)
        bad = self.guide.apply(params["guide"], *inputs).astype(jnp.float32)
        level = jnp.asarray(inputs[3], jnp.float32)
        w = jnp.where(level >= params["above"], params["weight"], 0.0)
        return good + w.reshape(w.shape + (1,) * (good.ndim - w.ndim)) * (good - bad)


def guidance_weight(weight) -> float:
    """``weight`` as a float; SamplingError naming it (``weight``, the CLI's
    ``--guidance``) unless finite and >= -1 (>= 0: guidance; [-1, 0): a blend of the two
    runs)."""
    try:
        w = float(weight)
    except (TypeError, ValueError):
        raise SamplingError(f"guidance weight (--guidance): expected a number >= -1, got "
                            f"{weight!r}") from None
    if not (math.isfinite(w) and w >= -1.0):
        raise SamplingError(f"guidance weight (--guidance): expected a finite number >= -1 "
                            f"(>= 0 guides, -1/2 averages the two runs), got {weight!r}")
    return w


def check_compatible(run: Run, guide: Run, guide_name: str = "the guide") -> None:
    """SamplingError naming the field unless ``guide`` can guide ``run``: the same noise
    process (kind and the ``PROCESS_FIELDS`` it has), the same dataset (``config.data
    .source`` and, where both runs recorded it, the digest of the training graphs) and
    the same ``max_nodes``."""
    if type(run.process) is not type(guide.process):
        raise SamplingError(f"{guide_name}: its noise process is {type(guide.process).__name__}"
                            f", the sampled run's is {type(run.process).__name__}")
    for name in PROCESS_FIELDS:
        a, b = getattr(run.process, name, None), getattr(guide.process, name, None)
        if a != b:
            raise SamplingError(f"{guide_name}: its process has {name}={b!r}, the sampled "
                                f"run's {name}={a!r}; the guide must be trained with the same "
                                "noise process")
    src_a, src_b = run.config.data.get("source"), guide.config.data.get("source")
    if src_a != src_b:
        raise SamplingError(f"{guide_name}: trained on data.source={src_b!r}, the sampled run "
                            f"on {src_a!r}")
    dig_a, dig_b = run.train_digest, guide.train_digest
    if dig_a is not None and dig_b is not None and dig_a != dig_b:
        # the same source name, other graphs (a data file that changed between the runs)
        raise SamplingError(f"{guide_name}: trained on other graphs than the sampled run "
                            f"although both name data.source={src_a!r} (training-split "
                            f"digests {dig_b} and {dig_a}, dataset.json)")
    if run.max_nodes != guide.max_nodes:
        raise SamplingError(f"{guide_name}: max_nodes={guide.max_nodes}, the sampled run's "
                            f"{run.max_nodes}")


def load_guide(workdir: str, checkpoint: str = "latest", **options) -> Run:
    """``sampling.load_run`` of a guide, its errors prefixed with the flags that name it
    (``--guide W (--guide_checkpoint C): ...``); ``options`` as ``load_run`` takes them."""
    try:
        return load_run(workdir, checkpoint, **options)
    except SamplingError as e:
        raise SamplingError(f"--guide {workdir} (--guide_checkpoint {checkpoint}): {e}") from e


def guided_run(run: Run, guide: Run, weight: float, guide_name: str = "the guide",
               above: float = 0.0) -> Run:
    """``run`` sampled with autoguidance by ``guide`` at ``weight``, in the steps at noise
    levels ``>= above`` (0: all; module docstring).

    The result is a ``Run`` that ``sampling.generate`` takes as it is: ``run``'s config,
    process (its sampler and levers), node counts and buckets, with ``model`` an
    :class:`AutoGuidedDenoiser` and ``meta["guidance"]`` recording the weight and the
    guide's checkpoint meta. Raises SamplingError (``check_compatible``,
    ``guidance_weight``, and for ``above`` outside [0, 1/2] or ``above > 0`` with a process
    other than bit flips, naming ``above``, the CLI's ``--guidance_above``)."""
    w = guidance_weight(weight)
    check_compatible(run, guide, guide_name)
    what = "guidance interval above (--guidance_above)"
    try:
        above = float(above)
    except (TypeError, ValueError):
        raise SamplingError(f"{what}: expected a noise level in [0, 1/2], got {above!r}") from None
    if not 0.0 <= above <= 0.5:
        raise SamplingError(f"{what}: expected a noise level in [0, 1/2], got {above}")
    if above > 0.0 and run.process.name != "discrete":
        raise SamplingError(f"{what}: a level of the bit-flip (discrete) process's beta_bar; "
                            f"this run's process is {run.process.name!r}")
    params = {"model": run.params, "guide": guide.params, "weight": jnp.float32(w),
              "above": jnp.float32(above)}
    meta = dict(run.meta, guidance={"weight": w, "above": above,
                                    "guide_meta": dict(guide.meta)})
    return run._replace(model=AutoGuidedDenoiser(run.model, guide.model), params=params,
                        meta=meta)
