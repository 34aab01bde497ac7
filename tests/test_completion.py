"""Graph completion: the sampler keeps known pairs exactly, varies with the seed, RePaint
moves, input checks with clear errors, the API and the ``ddgjax-sample --complete`` CLI."""
import json

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

import ddgjax
from configs import test as test_config
from ddgjax.cli import sample as sample_cli
from ddgjax.completion import (check_completion_input, complete, extend_graph, hide_pairs,
                               read_masks, write_masks)
from ddgjax.data import read_graph_list, write_graph_list
from ddgjax.processes import BitFlipProcess, GaussianProcess
from ddgjax.processes.bitflip.inpainting import completer, forward_jump, repaint_moves
from ddgjax.sampling import SamplingError


def test_repaint_moves():
    assert repaint_moves(3) == [(0, 1), (1, 2), (2, 3)]
    moves = repaint_moves(5, jump=2, rounds=1)
    assert moves[:5] == [(0, 1), (1, 2), (2, 0), (0, 1), (1, 2)]
    assert sum(b == a + 1 for a, b in moves) == 5 * 2 and moves[-1] == (4, 5)
    pos = 0
    for a, b in moves:                   # a connected walk
        assert a == pos
        pos = b
    with pytest.raises(ValueError):
        repaint_moves(3, jump=-1)


def test_forward_jump_has_the_kernel_marginals():
    N = 160
    adj = jnp.zeros((1, N, N)).at[0, :60, :].set(1.0)
    adj = jnp.triu(adj, 1)
    adj = adj + jnp.swapaxes(adj, 1, 2)
    mask = jnp.ones((1, N), bool)
    iu = np.triu_indices(N, 1)
    a0 = np.asarray(adj[0])[iu]
    for rho in (0.5, 0.2):
        out = np.asarray(forward_jump(jax.random.key(1), adj, mask, 0.1, 0.3, rho)[0])[iu]
        redraw = 2 * (0.3 - 0.1) / (1 - 0.2)
        for a, want in ((1, 1 - redraw + redraw * rho), (0, redraw * rho)):
            assert abs(out[a0 == a].mean() - want) < 0.025   # > 5 standard errors


def edge_loving(a, m, t, s):
    """A denoiser sure that every pair is an edge."""
    mm = (m[:, :, None] & m[:, None, :]).astype(jnp.float32)
    return 8.0 * mm * (1 - jnp.eye(a.shape[-1]))


@pytest.mark.parametrize("options", [
    dict(algorithm=1), dict(algorithm=2, resample_jump=2, resample_rounds=2),
    dict(algorithm=1, renoise_mix=0.5, logit_scale=0.8)])
def test_completion_sampler_keeps_known_pairs_and_samples_the_rest(options):
    process = BitFlipProcess(num_timesteps=6, prior_density=0.3)
    comp = completer(process, None, **options)
    N, B = 9, 4
    rng = np.random.default_rng(0)
    adj = np.triu(rng.random((B, N, N)) < 0.3, 1)
    adj = (adj | np.swapaxes(adj, 1, 2)).astype(np.float32)
    counts = np.array([9, 7, 5, 2])
    mask = np.arange(N)[None] < counts[:, None]
    known = np.triu(rng.random((B, N, N)) < 0.5, 1)
    known = (known | np.swapaxes(known, 1, 2)) & mask[:, :, None] & mask[:, None, :]
    adj = adj * mask[:, :, None] * mask[:, None, :]
    keys = jax.random.split(jax.random.key(0), B)
    out = np.asarray(jax.jit(comp, static_argnums=0)(edge_loving, keys, jnp.asarray(adj),
                                                     jnp.asarray(known), jnp.asarray(mask)))
    np.testing.assert_array_equal(out[known], adj[known])
    np.testing.assert_array_equal(out, np.swapaxes(out, 1, 2))
    pairs = mask[:, :, None] & mask[:, None, :] & ~np.eye(N, dtype=bool)
    assert not out[~pairs].any()                           # diagonal and padding stay 0
    assert out[pairs & ~known].mean() > 0.95               # the model's edges fill the rest


def test_completer_refuses_other_processes_and_half_resampling():
    with pytest.raises(ValueError, match="bit-flip"):
        completer(GaussianProcess())
    with pytest.raises(ValueError, match="set both"):
        completer(BitFlipProcess(), resample_jump=2)
    with pytest.raises(ValueError, match="renoise_mix: acts only in Algorithm 1"):
        completer(BitFlipProcess(), algorithm=2, renoise_mix=0.5)


def test_common_masks():
    g = nx.path_graph(4)
    adj, known = extend_graph(g, 2)
    assert adj.shape == (6, 6) and known[:4, :4].sum() == 12 and not known[4:].any()
    assert not known[:, 4:].any()
    adj, known = hide_pairs(g, 0.5, seed=3)
    assert np.array_equal(known, known.T) and np.triu(~known, 1).sum() == 3
    assert not np.array_equal(known, hide_pairs(g, 0.5, seed=4)[1])


def test_input_checks_name_the_problem():
    adj = nx.to_numpy_array(nx.path_graph(4))
    known = np.ones((4, 4), bool)
    with pytest.raises(SamplingError, match=r"known: the mask must be symmetric; known\[0, 1\]"):
        bad = known.copy()
        bad[0, 1] = False
        check_completion_input(adj, bad, 20)
    with pytest.raises(SamplingError, match=r"known: expected the adjacency's shape \(4, 4\)"):
        check_completion_input(adj, np.ones((5, 5), bool), 20)
    with pytest.raises(SamplingError, match="21 nodes.*max_nodes=20"):
        check_completion_input(np.zeros((21, 21)), np.ones((21, 21), bool), 20)
    with pytest.raises(SamplingError, match="expected 0/1 entries"):
        check_completion_input(adj * 2, known, 20)
    with pytest.raises(SamplingError, match=r"not symmetric on known pair \(0, 2\)"):
        asym = adj.copy()
        asym[0, 2] = 1
        check_completion_input(asym, known, 20)
    with pytest.raises(SamplingError, match="square"):
        check_completion_input(np.zeros(4), np.zeros(4), 20)
    a, k = check_completion_input(adj + np.eye(4), known, 20)   # the diagonal is ignored
    assert not a.diagonal().any() and not k.diagonal().any()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 2
    wd = tmp_path_factory.mktemp("complete") / "run"
    ddgjax.train(cfg, str(wd), verbose=False)
    return wd, ddgjax.load(str(wd)), ddgjax.load_dataset(cfg.data.source)


def as_adj(g, n):
    return nx.to_numpy_array(g, nodelist=range(n), dtype=np.uint8)


def test_api_keeps_known_pairs_in_every_sample_and_varies_with_the_seed(trained):
    _, model, ds = trained
    g = next(h for h in ds.test if h.number_of_nodes() <= 16)
    for adj, known in (hide_pairs(g, 0.5, 0), extend_graph(g, 3)):
        n = len(adj)
        a = model.complete(adj, known, num_samples=6, seed=0)
        b = model.complete(adj, known, num_samples=6, seed=1)
        assert len(a) == 6 and all(isinstance(h, nx.Graph) for h in a)
        for h in a + b:
            assert h.number_of_nodes() == n
            np.testing.assert_array_equal(as_adj(h, n)[known], adj[known])
        unknown = lambda hs: np.stack([as_adj(h, n)[~known] for h in hs])
        assert not np.array_equal(unknown(a), unknown(b))          # seeds differ
        assert len({unknown(a)[i].tobytes() for i in range(6)}) > 1  # samples differ
        again = model.complete(adj, known, num_samples=6, seed=0)
        np.testing.assert_array_equal(unknown(a), unknown(again))
    r = model.complete(adj, known, 2, seed=0, resample_jump=2, resample_rounds=1)
    np.testing.assert_array_equal(as_adj(r[0], len(adj))[known], adj[known])


def test_batches_do_not_change_completions(trained):
    _, model, ds = trained
    reqs = [hide_pairs(g, 0.3, i) for i, g in enumerate(ds.test[:3])]
    a = complete(model.run, reqs, num_samples=3, seed=5, batch_size=4)
    b = complete(model.run, reqs, num_samples=3, seed=5, batch_size=9)
    np.testing.assert_array_equal(a["adj"], b["adj"])
    assert a["adj"].shape == (3, 3, 20, 20) and len(a["graphs"][2]) == 3
    with pytest.raises(SamplingError, match="graph 1: known: the mask must be symmetric"):
        bad = reqs[1][1].copy()
        bad[0, 1] = ~bad[0, 1]
        complete(model.run, [reqs[0], (reqs[1][0], bad)])


def test_cli_completes_graph_files(trained, tmp_path, capsys):
    wd, _, ds = trained
    graphs = ds.test[:2]
    write_graph_list(tmp_path / "g.json", graphs)
    masks = [hide_pairs(g, 0.4, i)[1] for i, g in enumerate(graphs)]
    write_masks(tmp_path / "m.json", masks)
    assert [np.array_equal(m, r) for m, r in zip(
        masks, read_masks(tmp_path / "m.json", [g.number_of_nodes() for g in graphs]))] == [True] * 2
    out = tmp_path / "out"
    assert sample_cli.main(["ddgjax-sample", "--workdir", str(wd), "--complete",
                            str(tmp_path / "g.json"), "--known", str(tmp_path / "m.json"),
                            "--num_samples", "3", "--out", str(out), "--quiet"]) == 0
    f = read_graph_list(out / "samples.json")
    assert len(f.graphs) == 6 and (out / "grid.png").exists()
    meta = json.loads((out / "samples.json").read_text())["generated_by"]
    assert meta["source_index"] == [0, 0, 0, 1, 1, 1] and meta["task"] == "completion"
    for h, src in zip(f.graphs, meta["source_index"]):
        n = graphs[src].number_of_nodes()
        np.testing.assert_array_equal(as_adj(h, n)[masks[src]],
                                      as_adj(graphs[src], n)[masks[src]])
    assert sample_cli.main(["ddgjax-sample", "--workdir", str(wd), "--complete",
                            str(tmp_path / "g.json"), "--add_nodes", "1", "--out", str(out),
                            "--quiet", "--num_samples", "2"]) == 0
    assert [h.number_of_nodes() for h in read_graph_list(out / "samples.json").graphs][::2] == \
        [g.number_of_nodes() + 1 for g in graphs]
    capsys.readouterr()
    (tmp_path / "bad.json").write_text(json.dumps({"masks": [{"unknown": [[0, 99]]},
                                                             {"unknown": []}]}))
    assert sample_cli.main(["ddgjax-sample", "--workdir", str(wd), "--complete",
                            str(tmp_path / "g.json"), "--known", str(tmp_path / "bad.json"),
                            "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "bad.json: mask 0: field 'unknown': bad pair [0, 99]" in err
    (tmp_path / "bad.json").write_text(json.dumps({"masks": [{"unknown": []}]}))
    assert sample_cli.main(["ddgjax-sample", "--workdir", str(wd), "--complete",
                            str(tmp_path / "g.json"), "--known", str(tmp_path / "bad.json"),
                            "--out", str(out), "--quiet"]) == 1
    assert "field 'masks' has 1 masks for 2 graphs" in capsys.readouterr().err
    assert sample_cli.main(["ddgjax-sample", "--workdir", str(wd), "--complete",
                            str(tmp_path / "g.json"), "--add_nodes", "9", "--out", str(out),
                            "--quiet"]) == 1
    assert "g.json: graph 0 plus 9 new nodes: adjacency:" in capsys.readouterr().err


def test_weighted_networkx_graphs_keep_their_edges():
    """Edge attributes such as ``weight`` are not read as the adjacency: a weighted path
    keeps all its edges in completion's inputs."""
    from ddgjax.completion import extend_graph, hide_pairs

    g = nx.path_graph(4)
    nx.set_edge_attributes(g, 0.25, "weight")
    adj, known = extend_graph(g, 2)
    assert adj[:4, :4].sum() == 6 and known[:4, :4].sum() == 12
    adj, _ = hide_pairs(g, 0.0, seed=0)
    assert adj.sum() == 6
