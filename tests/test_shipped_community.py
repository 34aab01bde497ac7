"""Quality guard on a second family: the shipped Community-small model (PPGN 6x32, Algorithm
2 over its 32 levels), sampled on the CPU, gives graphs of two dense communities. Negated
logits or the levels visited upwards fail it (tests/mutation_check.py, the
``*_community`` mutants); a denoiser told beta_bar = 0 and Algorithm 2 re-noising to
beta_bar_t instead of beta_bar_{t-1} do not (the Planar-64 guard and tests/test_bitflip.py
catch those).

The rule: the graph is connected and the Kernighan-Lin bisection (seed 0) splits it into
two halves each of density >= 0.45 with at most 0.2 of the cross pairs joined. Every
training and test graph passes; Erdos-Renyi graphs of the test graphs' sizes and
densities pass 5 %; the shipped model's samples passed 78 % and 75 % (32 graphs, seeds
0 and 1). The guard asks 16 of 32 (at p = 0.75 per graph, fewer than 16 has probability
below 0.1 %). 32 graphs took 6 s on this repository's two CPU cores.
"""
import networkx as nx
from networkx.algorithms.community import kernighan_lin_bisection

import ddgjax


def two_communities(g: nx.Graph, dense: float = 0.45, sparse: float = 0.2) -> bool:
    """Connected, and split by a Kernighan-Lin bisection into two dense halves that few
    edges join."""
    if g.number_of_nodes() < 4 or not nx.is_connected(g):
        return False
    a, b = kernighan_lin_bisection(g, seed=0)
    cross = nx.cut_size(g, a, b) / (len(a) * len(b))
    return min(nx.density(g.subgraph(a)), nx.density(g.subgraph(b))) >= dense and cross <= sparse


def test_the_rule_separates_the_data_from_random_graphs():
    ds = ddgjax.load_dataset("community_small")
    assert all(two_communities(g) for g in ds.test)
    er = [nx.gnp_random_graph(g.number_of_nodes(), nx.density(g), seed=i)
          for i, g in enumerate(ds.test)]
    assert sum(map(two_communities, er)) <= 3


def test_the_shipped_community_model_samples_two_communities():
    graphs = ddgjax.load("pretrained:community_small").sample(32, seed=0)
    assert len(graphs) == 32
    assert sum(map(two_communities, graphs)) >= 16
