"""Ensembles: sample with the averaged denoiser of several runs of one bit-flip process.

Runs trained on the same data with the same noise process but other seeds (or widths)
each estimate ``p(a_0 = 1 | A_t)`` per pair. An ensemble samples with their average at
every step, for the price of one forward pass per member and the same number of steps:

* ``mean="probs"`` (the default): the mixture ``p = (1/K) sum_k sigmoid(l_k)``, the usual
  ensemble prediction (Lakshminarayanan et al. 2017), handed to the sampler as its
  logit ``log p - log(1 - p)``;
* ``mean="logits"``: ``(1/K) sum_k l_k``, a product of experts (normalised geometric mean);
  for two members it is what ``ddgjax.guidance`` samples at weight ``-1/2``.

Both are the member itself for one member, and both are symmetric in the members.
Sampler levers such as ``logit_scale`` act on the ensemble's logits, as on a single run's.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from ddgjax.guidance import check_compatible
from ddgjax.sampling import Run, SamplingError, load_run

MEANS = ("probs", "logits")


def mean_of_probabilities_logit(logits: jax.Array) -> jax.Array:
    """``[K, ...]`` logits -> ``[...]`` the logit of the mean of their probabilities.

    ``log mean_k sigmoid(l_k) - log mean_k sigmoid(-l_k)``, each mean a log-sum-exp of
    log-sigmoids (the ``log K`` cancels), so it is exact where the probabilities round
    to 0 or 1 in float32."""
    logits = logits.astype(jnp.float32)
    return (jax.nn.logsumexp(jax.nn.log_sigmoid(logits), axis=0)
            - jax.nn.logsumexp(jax.nn.log_sigmoid(-logits), axis=0))


@dataclasses.dataclass(frozen=True)
class EnsembleDenoiser:
    """A denoiser with the ``model.apply`` interface the samplers call.

    ``apply({"members": (params_1, ..., params_K)}, *inputs)`` runs each member's model on
    the same inputs and returns their average (``mean``, module docstring) in float32,
    ``[B, N, N]``. Hashable (a tuple of Flax modules and a string), so
    ``sampling.compiled_sampler`` compiles it once per ensemble architecture.
    """

    models: tuple
    mean: str = "probs"

    def apply(self, params, *inputs):
        members = params["members"]
        if len(members) != len(self.models):
            raise ValueError(f"EnsembleDenoiser: {len(self.models)} models, "
                             f"{len(members)} parameter sets")
        outs = jnp.stack([m.apply(p, *inputs).astype(jnp.float32)
                          for m, p in zip(self.models, members)])
        if self.mean == "logits":
            return jnp.mean(outs, axis=0)
        return mean_of_probabilities_logit(outs)


def ensemble_mean(mean: Any) -> str:
    """``mean`` if it names an averaging rule; SamplingError naming ``--ensemble_mean``."""
    if mean not in MEANS:
        raise SamplingError(f"ensemble mean (--ensemble_mean): expected one of "
                            f"{', '.join(MEANS)}, got {mean!r}")
    return mean


def ensemble_run(run: Run, others: Sequence[Run], mean: str = "probs",
                 names: Sequence[str] | None = None) -> Run:
    """``run`` sampled with the average of its denoiser and those of ``others``.

    The result is a ``Run`` that ``sampling.generate`` takes as it is: ``run``'s config,
    process (its sampler and levers), node counts and buckets, with ``model`` an
    :class:`EnsembleDenoiser` and ``meta["ensemble"]`` recording the rule and every
    member's checkpoint meta. ``names`` name the ``others`` in errors (default
    ``ensemble member k``). Raises SamplingError for an unknown ``mean``, no ``others``,
    a process other than bit flips, or a member that ``guidance.check_compatible``
    refuses (another noise process, dataset or ``max_nodes``).
    """
    mean = ensemble_mean(mean)
    if not others:
        raise SamplingError("an ensemble needs at least one run besides the sampled one "
                            "(--ensemble W2[,W3,...])")
    if run.process.name != "discrete":
        raise SamplingError(f"ensembles average the bit-flip denoiser's probabilities; this "
                            f"run's process is {run.process.name!r}")
    names = list(names) if names is not None else [f"ensemble member {k + 2}"
                                                   for k in range(len(others))]
    for other, name in zip(others, names):
        check_compatible(run, other, name)
    members = (run,) + tuple(others)
    meta = dict(run.meta, ensemble={"mean": mean, "size": len(members),
                                    "member_meta": [dict(m.meta) for m in members]})
    return run._replace(model=EnsembleDenoiser(tuple(m.model for m in members), mean),
                        params={"members": tuple(m.params for m in members)}, meta=meta)


def load_members(workdirs: Sequence[str], checkpoint: str, **options) -> list[Run]:
    """``sampling.load_run`` of each ensemble member, its errors prefixed with the flag
    and workdir that name it (``--ensemble W (--checkpoint C): ...``)."""
    runs = []
    for w in workdirs:
        try:
            runs.append(load_run(w, checkpoint, **options))
        except SamplingError as e:
            raise SamplingError(f"--ensemble {w} (--checkpoint {checkpoint}): {e}") from e
    return runs


def ensemble_from_workdirs(run: Run, workdirs: Sequence[str], checkpoint: str,
                           mean: str = "probs", **options) -> tuple[Run, dict]:
    """``run`` ensembled with the runs in ``workdirs`` (``load_members`` with the same
    ``checkpoint`` and load ``options``), and the record the sample files keep:
    ``{"ensemble": workdirs, "ensemble_mean": mean, "ensemble_epochs": [...]}``. The
    members are named ``--ensemble W`` in errors."""
    others = load_members(workdirs, checkpoint, **options)
    run = ensemble_run(run, others, mean, names=[f"--ensemble {w}" for w in workdirs])
    return run, {"ensemble": list(workdirs), "ensemble_mean": mean,
                 "ensemble_epochs": [o.meta.get("epoch") for o in others]}


def parse_workdirs(value: str | None) -> list[str]:
    """``--ensemble W2,W3`` -> ``["W2", "W3"]``; ValueError naming the flag for an empty
    entry."""
    if value is None:
        return []
    parts = [p.strip() for p in value.split(",")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"--ensemble: expected comma-separated workdirs, got {value!r}")
    return parts
