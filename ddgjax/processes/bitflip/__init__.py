"""The paper's bit-flip process (docs/method.md), cut along its data flow:

* ``schedules``: the beta_bar schedules and the grids of levels a sampler visits
  (float64 NumPy, host side);
* ``transitions``: the forward process ``q(A_t | A_0)``, its posterior
  ``q(A_{t-1} | A_t, A_0)`` and the reverse model ``p_theta(A_{t-1} | A_t)``;
* ``losses``: L_vb and L_simple (``training_loss``);
* ``sampler``: the reverse step and the ``lax.scan`` chain (Algorithms 1 and 2);
* ``process``: ``BitFlipProcess``, the ``NoiseProcess`` that packages them, and
  ``from_config`` / ``fit_to_data`` for the registry (``ddgjax.processes``);
* ``elbo`` and ``inpainting``: the likelihood bound and graph completion built on them.

Every module is pure functions of arrays (no Flax, no training loop); this package
re-exports the names a user of the process needs.
"""
from ddgjax.processes.bitflip.losses import (LOSSES, TRAIN_GRIDS, simple_weight, training_levels,
                                             training_loss, vb_terms)
from ddgjax.processes.bitflip.process import (PRIORS, BitFlipProcess, BitFlipSampler,
                                              default_algorithm, fit_to_data, from_config,
                                              prior_density)
from ddgjax.processes.bitflip.sampler import (LEVERS, SamplerLevers, reverse_step,
                                              sample_graphs, sample_graphs_vmapped)
from ddgjax.processes.bitflip.schedules import (GRIDS, SCHEDULES, NoiseSchedule, make_schedule,
                                                parse_grid, sampling_grid)
from ddgjax.processes.bitflip.transitions import (ALGORITHMS, binary_kl, binary_nll,
                                                  p_prev_probs, q_marginal_prob1,
                                                  q_posterior_probs, q_sample, reverse_probs,
                                                  sample_prior, symmetric_upper_bernoulli)

__all__ = ["ALGORITHMS", "BitFlipProcess", "BitFlipSampler", "GRIDS",
           "LEVERS", "LOSSES", "NoiseSchedule", "PRIORS", "SCHEDULES", "SamplerLevers",
           "TRAIN_GRIDS", "binary_kl", "binary_nll", "default_algorithm", "fit_to_data",
           "from_config", "make_schedule", "p_prev_probs", "parse_grid", "prior_density",
           "q_marginal_prob1", "q_posterior_probs", "q_sample", "reverse_probs",
           "reverse_step", "sample_graphs", "sample_graphs_vmapped", "sample_prior",
           "sampling_grid", "simple_weight", "symmetric_upper_bernoulli", "training_levels",
           "training_loss", "vb_terms"]
