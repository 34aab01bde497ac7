"""Quality guard: the shipped SPECTRE Planar-64 model, sampled on the CPU with its row's
sampler (Algorithm 2, 64 steps on the power:3 grid, bfloat16), gives planar, connected
graphs. Negated logits, a denoiser told beta_bar = 0, or the levels visited upwards fail
it (tests/mutation_check.py; docs/results.md lists the sampler bugs it does not see).

Calibration: the shipped file gave 94.5 % valid graphs over 5 x 40 samples on the CPU
(docs/results.md, "Pretrained models"); at p = 0.945 per graph, both of 2 fail with
probability 0.3 %, while each of the three mutants above gives no valid graph. Three
graphs took 65 s on two loaded CPU cores (the full suite running beside it); two cost
about two thirds of that (the batch's cost is linear in its graphs; not timed apart). The
Community-small guard (tests/test_shipped_community.py) checks a second family.
"""
import ddgjax
from ddgjax.metrics.validity import is_planar_valid


def test_the_shipped_planar_64_model_samples_planar_connected_graphs():
    graphs = ddgjax.load("pretrained:spectre_planar_64").sample(2, seed=0)
    assert [g.number_of_nodes() for g in graphs] == [64, 64]
    assert sum(is_planar_valid(g) for g in graphs) >= 1
