"""The large PolyGraph sets (Planar-L, SBM-L, Lobster-L): the benchmark's seeding, pinned
first graphs of every split, the lobster rule, and loading by name through the cache."""
import networkx as nx
import numpy as np
import pytest

from ddgjax.data import large_sets, load_dataset
from ddgjax.data.large_sets import config_digest, generate_split
from ddgjax.input_pipeline import graphs_digest
from ddgjax.metrics.validity import is_lobster_valid, validity_mask


def test_split_seeds_are_the_benchmarks():
    """The digests the polygraph-benchmark package seeds its test splits with."""
    assert config_digest((4096, 64, 42, "test")) == "fe55675c909485d97045a8fbb32209ed"
    assert config_digest((4096, 0.3, 0.005, (2, 5), (20, 40), 42, "test")) == \
        "d633c3b4c8f3039f4e84bfbad27166aa"
    assert config_digest((4096, 80, 0.7, 0.7, 10, 100, 42, "test")) == \
        "9bc52f06eb37d9d23798f52e6b2547c1"


# the first two graphs of each split (graphs_digest: node counts and sorted edges)
FIRST_GRAPHS = {
    ("planar_l", "train"): "1ae37d6b40c57a57", ("planar_l", "val"): "53d9b3690136f34b",
    ("planar_l", "test"): "795f00a9c96e0e75", ("sbm_l", "train"): "929889842b9ac278",
    ("sbm_l", "val"): "f4fd9cabb229f9d7", ("sbm_l", "test"): "deac14c57632d5c8",
    ("lobster_l", "train"): "cf2d5bb0d6d30eca", ("lobster_l", "val"): "47055ed56d888107",
    ("lobster_l", "test"): "640daf29e9b52170",
}


@pytest.mark.parametrize("name, split", sorted(FIRST_GRAPHS))
def test_first_graphs_of_each_split_are_pinned(name, split):
    graphs = generate_split(name, split, 2)
    assert graphs_digest(graphs) == FIRST_GRAPHS[name, split]
    assert all(sorted(g.nodes) == list(range(g.number_of_nodes())) for g in graphs)


def test_generators_draw_their_families():
    planar = generate_split("planar_l", "test", 40)
    # the benchmark's Planar-L test graphs average 178.2 edges (3n - 3 - hull)
    assert abs(np.mean([g.number_of_edges() for g in planar]) - 178.2) < 2
    assert validity_mask(planar, "planar").all()
    sbm = generate_split("sbm_l", "train", 40)
    assert all(40 <= g.number_of_nodes() <= 200 for g in sbm)
    lobsters = generate_split("lobster_l", "train", 40)
    assert all(10 <= g.number_of_nodes() <= 100 for g in lobsters)
    assert validity_mask(lobsters, "lobster").all()


def test_lobster_rule():
    caterpillar = nx.path_graph(6)
    caterpillar.add_edges_from([(2, 6), (6, 7), (3, 8)])      # legs of one and two hops
    assert is_lobster_valid(caterpillar) and is_lobster_valid(nx.path_graph(2))
    assert is_lobster_valid(nx.star_graph(5))
    spider = nx.Graph()                                          # three legs of three hops
    for leg in range(3):
        nx.add_path(spider, [0] + [10 * leg + k for k in (1, 2, 3)])
    assert not is_lobster_valid(spider)                          # a tip 3 hops from any path
    assert not is_lobster_valid(nx.cycle_graph(5))               # not a tree
    two = nx.Graph([(0, 1), (2, 3)])
    assert not is_lobster_valid(two) and not is_lobster_valid(nx.Graph())


def test_a_large_set_loads_by_name_through_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(large_sets, "SPLIT_SIZES", {"train": 6, "val": 3, "test": 4})
    ds = load_dataset("lobster_l")
    assert (len(ds.train), len(ds.val), len(ds.test)) == (6, 3, 4)
    assert (tmp_path / "ddgjax" / "lobster_l.json.gz").exists()
    assert graphs_digest(ds.test) == graphs_digest(generate_split("lobster_l", "test"))
    (tmp_path / "ddgjax" / "lobster_l.json.gz").write_bytes(b"damaged")   # regenerated
    assert graphs_digest(load_dataset("lobster_l").train) == graphs_digest(ds.train)


def test_rbf_mmd_is_the_largest_scaled_gaussian_mmd_by_brute_force():
    from ddgjax.metrics.rbf import BASE_BANDWIDTHS, rbf_mmd2_max

    rng = np.random.default_rng(0)
    x, y = rng.random((7, 4)), rng.random((5, 3)) + 0.3       # y zero-padded to 4 columns
    y4 = np.pad(y, ((0, 0), (0, 1)))
    d2 = lambda a, b: sum((a[k] - b[k]) ** 2 for k in range(4))
    scale = np.sqrt(np.mean([[d2(a, b) for b in y4] for a in x]))
    values = []
    for s in BASE_BANDWIDTHS:
        k = lambda a, b: np.exp(-d2(a, b) / (2 * (scale * s) ** 2))
        mean = lambda p, q: np.mean([[k(a, b) for b in q] for a in p])
        values.append(mean(x, x) + mean(y4, y4) - 2 * mean(x, y4))
    assert rbf_mmd2_max(x, y) == pytest.approx(max(values), rel=1e-12)
    assert rbf_mmd2_max(x, x) == pytest.approx(0.0, abs=1e-12)


def test_polygraph_protocol_adds_rbf_mmds_to_spectres():
    from ddgjax.metrics import evaluate_generated

    ref = generate_split("planar_l", "test", 12)
    gen = [nx.cycle_graph(20) for _ in range(6)]
    spectre = evaluate_generated(gen, ref, protocol="spectre")
    poly = evaluate_generated(gen, ref, protocol="polygraph")
    for k in ("degree", "clustering", "orbit", "spectral"):
        assert poly[k] == pytest.approx(spectre[k])
        assert 0 < poly[f"rbf_{k}"] <= 2
    same = evaluate_generated(ref, ref, protocol="polygraph")
    assert all(abs(same[f"rbf_{k}"]) < 1e-9 for k in ("degree", "clustering", "orbit"))


def test_polygraph_protocol_fits_sbms_with_the_benchmarks_100_sweeps(monkeypatch):
    from ddgjax.metrics import evaluate_generated, validity

    seen = []

    def fake_validity(graphs, fit=None, refinement_steps=1000, **_):
        seen.append(refinement_steps)
        return np.ones(len(list(graphs)), bool), "fake"

    monkeypatch.setattr(validity, "sbm_validity", fake_validity)
    graphs = [nx.cycle_graph(n) for n in range(8, 20)]
    for protocol in ("polygraph", "spectre"):
        evaluate_generated(graphs, graphs, protocol=protocol, train=graphs, validity="sbm")
    assert seen == [100, 1000]
