"""Likelihoods: the Monte-Carlo negative ELBO against exact enumeration, the density
model's Bernoulli entropy, a tiny trained model on data vs ER(1/2), the API and CLI."""
import json
import math

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

import ddgjax
from configs import test as test_config
from ddgjax import evaluate as evaluate_cli
from ddgjax.graphs import node_mask_from_counts
from ddgjax.level_diagnostics import blind_logits
from ddgjax.likelihood import (density_bits_per_pair, edge_density, elbo_grid,
                               exact_nelbo_by_enumeration)
from ddgjax.processes import BitFlipProcess
from ddgjax.processes.bitflip import make_schedule, sampling_grid
from ddgjax.processes.bitflip.elbo import nelbo_draws, prior_term, summarize_draws
from ddgjax.sampling import SamplingError


def structured_denoiser(a, m, t, s):
    """A fixed denoiser that reads the whole graph (common neighbours), the level and the mask."""
    mm = (m[:, :, None] & m[:, None, :]).astype(jnp.float32)
    lg = (1.5 * a - 0.7 + 0.4 * jnp.einsum("bij,bjk->bik", a, a) - 2.0 * s[:, None, None] * a
          + 0.1 * t[:, None, None])
    return (lg + jnp.swapaxes(lg, 1, 2)) / 2 * mm * (1 - jnp.eye(a.shape[-1]))


def tiny_graph():
    adj = np.zeros((4, 4), np.float32)
    for i, j in ((0, 1), (1, 2), (0, 3)):
        adj[i, j] = adj[j, i] = 1
    return adj


def mc_estimate(denoise, adj, T, rho, algorithm, draws, pad=6, copies=2):
    """The jitted estimator on ``copies`` padded copies of ``adj``: (nats [copies], se)."""
    t, bb = sampling_grid(make_schedule("linear", T), None, "trained")
    n = len(adj)
    A = np.zeros((copies, pad, pad), np.float32)
    A[:, :n, :n] = adj
    mask = jnp.asarray(node_mask_from_counts(np.full(copies, n), pad))
    keys = jax.random.split(jax.random.key(0), copies)
    d = jax.jit(lambda k, a, m: nelbo_draws(denoise, k, a, m, t, bb, draws, rho, algorithm))(
        keys, jnp.asarray(A), mask)
    s = summarize_draws(np.asarray(d), np.asarray(prior_term(jnp.asarray(A), mask, 0.5, rho)))
    return s["nats"], s["se_nats"], (t, bb)


@pytest.mark.parametrize("rho,algorithm", [(0.5, 1), (0.3, 2)])
def test_estimate_equals_the_exact_elbo_by_enumeration(rho, algorithm):
    adj = tiny_graph()
    est, se, (t, bb) = mc_estimate(structured_denoiser, adj, 3, rho, algorithm, 2000)
    exact = exact_nelbo_by_enumeration(structured_denoiser, adj, t, bb, rho, algorithm)
    assert exact > 0
    assert np.all(se > 0) and np.all(se < 0.02 * exact)
    assert np.all(np.abs(est - exact) < 4 * se), (est, exact, se)


def test_density_model_gives_the_bernoulli_entropy():
    """The diffusion model of ER(d) (its denoiser the exact posterior of a_0 under ER(d)) has
    ELBO = NLL: the Bernoulli cross-entropy; a graph of density d scores its entropy H(d)."""
    adj = tiny_graph()        # 3 edges of 6 pairs
    d = 0.5
    for rho, dens in ((0.5, 0.5), (0.3, 0.25)):
        blind = lambda a, m, t, s, dens=dens, rho=rho: blind_logits(a, s, rho, dens)
        _, bb = sampling_grid(make_schedule("linear", 3), None, "trained")
        t = np.arange(len(bb))[::-1]
        exact = exact_nelbo_by_enumeration(blind, adj, t, bb, rho)
        xent = -(3 * math.log(dens) + 3 * math.log(1 - dens))
        assert exact == pytest.approx(xent, rel=1e-5)
        est, se, _ = mc_estimate(blind, adj, 3, rho, 1, 400)
        assert np.all(np.abs(est - xent) < 4 * se + 1e-4)
    assert density_bits_per_pair([nx.from_numpy_array(adj)], d)[0] == pytest.approx(1.0)
    # 3 edges and 3 non-edges at density 1/4: -(3 log2 1/4 + 3 log2 3/4) / 6 bits per pair
    assert density_bits_per_pair([nx.from_numpy_array(adj)], 0.25)[0] == pytest.approx(
        -(3 * math.log2(0.25) + 3 * math.log2(0.75)) / 6)
    # a denoiser that ignores A_t and predicts the density everywhere only bounds it from above
    const = lambda a, m, t, s: jnp.zeros_like(a)
    _, bb = sampling_grid(make_schedule("linear", 3), None, "trained")
    worse = exact_nelbo_by_enumeration(const, adj, np.arange(4)[::-1], bb)
    assert worse > 6 * math.log(2) + 1e-3


def test_prior_term_vanishes_at_the_top_level():
    adj = jnp.asarray(tiny_graph())[None]
    mask = jnp.ones((1, 4), bool)
    for rho in (0.5, 0.2):
        assert float(prior_term(adj, mask, 0.5, rho)[0]) == pytest.approx(0.0, abs=1e-6)
    assert float(prior_term(adj, mask, 0.3)[0]) > 0


def test_levels_of_the_bound():
    grid_model = BitFlipProcess(num_timesteps=8)
    t, bb, info = elbo_grid(grid_model)
    assert info["grid"] == "trained" and info["num_levels"] == 8 and list(t) == list(range(8, -1, -1))
    ct = BitFlipProcess(num_timesteps=8, continuous_time=True)
    _, bb, info = elbo_grid(ct, 5)
    assert (info["grid"], info["num_levels"], info["continuous_time"]) == ("uniform", 5, True)
    np.testing.assert_allclose(info["beta_bar"], np.arange(6) / 10)
    with pytest.raises(SamplingError, match="continuous time"):
        elbo_grid(grid_model, 4, "uniform")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 15
    cfg.train.checkpoint_every_epochs = 15
    wd = tmp_path_factory.mktemp("nll") / "run"
    ddgjax.train(cfg, str(wd), verbose=False)
    return wd, ddgjax.load(str(wd)), ddgjax.load_dataset(cfg.data.source)


def test_data_scores_far_below_random_graphs(trained):
    _, model, ds = trained
    test = ds.test[:8]
    er = [nx.gnp_random_graph(g.number_of_nodes(), 0.5, seed=i) for i, g in enumerate(test)]
    data_bits = model.nll(test, num_samples=4)
    er_bits = model.nll(er, num_samples=4)
    assert data_bits.shape == (8,)
    assert er_bits.mean() > 1.0                          # no better than a fair coin per pair
    assert data_bits.mean() < er_bits.mean() - 0.3       # the test graphs: much less
    assert data_bits.mean() < density_bits_per_pair(test, edge_density(ds.train)).mean() + 0.05


def test_nll_is_seeded_and_batch_independent(trained):
    _, model, ds = trained
    graphs = ds.test[:5]
    a = model.elbo(graphs, 3, seed=1, batch_size=2)
    b = model.elbo(graphs, 3, seed=1, batch_size=5)
    np.testing.assert_allclose(a["bits_per_pair"], b["bits_per_pair"], rtol=1e-5)
    c = model.elbo(graphs, 3, seed=2)
    assert not np.allclose(a["bits_per_pair"], c["bits_per_pair"])
    assert np.all(a["se_bits_per_pair"] > 0) and a["per_level_bits"].shape == (5, 8)
    np.testing.assert_allclose(a["bits_per_graph"], a["bits_per_pair"] * a["num_pairs"])
    adj = nx.to_numpy_array(graphs[0], dtype=np.uint8)     # adjacencies work too
    np.testing.assert_allclose(model.nll([adj], 3, seed=1), a["bits_per_pair"][:1], rtol=1e-5)


def test_nll_bad_input(trained):
    _, model, _ = trained
    with pytest.raises(SamplingError, match="21 nodes.*max_nodes=20"):
        model.nll([nx.path_graph(21)])
    with pytest.raises(SamplingError, match="graph 1 has 1 node"):
        model.nll([nx.path_graph(3), nx.empty_graph(1)])
    with pytest.raises(SamplingError, match="num_draws"):
        model.nll([nx.path_graph(3)], num_samples=0)
    with pytest.raises(SamplingError, match="graph 0: the adjacency must be symmetric"):
        model.nll([np.triu(np.ones((3, 3)), 1)])


def test_evaluate_cli_nll(trained, tmp_path, capsys):
    wd, _, ds = trained
    path = tmp_path / "g.json"
    from ddgjax.data import write_graph_list
    write_graph_list(path, ds.train[:6] + ds.test[:4], split={"train": list(range(6)),
                                                               "test": [6, 7, 8, 9]})
    assert evaluate_cli.main(["--nll", "--workdir", str(wd), "--reference", f"{path}:test",
                              "--num_draws", "2", "--per_graph"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_graphs"] == 4 and out["grid"] == "trained" and out["num_levels"] == 8
    assert 0 < out["bits_per_pair"] < out["er_density_bits_per_pair"] + 0.1
    assert len(out["per_graph_bits_per_pair"]) == 4 and out["se_bits_per_pair"] > 0
    assert out["train"] == f"{path}:train"
    assert evaluate_cli.main(["--nll", "--reference", f"{path}:test"]) == 1
    assert "--nll needs --workdir" in capsys.readouterr().err
    assert evaluate_cli.main(["--reference", f"{path}:test"]) == 2
    assert "required: --generated" in capsys.readouterr().err
