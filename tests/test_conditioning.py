"""Conditional generation: condition vectors, label dropout, classifier-free guidance (the
arithmetic against brute force in float64), the conditioned denoisers, and a tiny
conditional run end to end (train, sample by label, the record)."""
from __future__ import annotations

import json

import chex
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

import ddgjax
from ddgjax import conditioning as cd
from ddgjax.models import build_model, init_params
from ddgjax.sampling import SamplingError, generate, load_run

from helpers import random_batch


def _labelled(n, label=None, props=None):
    g = nx.path_graph(n)
    if label is not None:
        g.graph["label"] = label
    if props is not None:
        g.graph["properties"] = props
    return g


# ---------------------------------------------------------------------------- guidance


@pytest.mark.parametrize("w", [0.0, 0.5, 1.0, 2.0, 3.7])
def test_guided_logits_are_the_normalised_tilt(w):
    """p_w(a) ∝ p(a | c)^(1+w) p(a)^(-w) over a in {0, 1}, normalised by brute force in
    float64, has P(a = 1) = sigmoid((1+w) l_c - w l_u)."""
    rng = np.random.default_rng(0)
    lc, lu = rng.normal(0, 4, (2, 200))
    sig = lambda x: 1.0 / (1.0 + np.exp(-x))
    pc1, pu1 = sig(lc), sig(lu)
    t1 = pc1 ** (1 + w) * pu1 ** (-w)
    t0 = (1 - pc1) ** (1 + w) * (1 - pu1) ** (-w)
    np.testing.assert_allclose(sig(cd.guided_logits(lc, lu, w)), t1 / (t0 + t1), rtol=1e-8)


def test_no_guidance_is_the_conditional_prediction_itself():
    lc, lu = np.arange(4.0), -np.arange(4.0)
    assert cd.guided_logits(lc, lu, 0.0) is lc


def test_condition_denoiser_runs_one_doubled_batch_for_guidance():
    calls = []

    def apply(a, m, t, s, *c):
        calls.append((a.shape[0], len(c)))
        return a * (c[0][:, :1, None] if c else 1.0)

    a = jnp.ones((3, 4, 4))
    m, t, s = jnp.ones((3, 4), bool), jnp.zeros(3, jnp.int32), jnp.zeros(3)
    cond = jnp.full((3, 2), 2.0)
    out = cd.condition_denoiser(apply, cond, 1.5)(a, m, t, s)
    assert calls == [(6, 1)]
    np.testing.assert_allclose(out, 2.0 + 1.5 * (2.0 - 0.0))     # l_c = 2, l_u = 0
    calls.clear()
    cd.condition_denoiser(apply, cond, 0.0)(a, m, t, s)
    cd.condition_denoiser(apply, None, 0.0)(a, m, t, s)
    assert calls == [(3, 1), (3, 0)]


# ---------------------------------------------------------------------------- encoding


def test_conditions_and_encoding():
    graphs = [_labelled(5, "b", {"k": 2}), _labelled(7, "a", {"k": 4}),
              _labelled(6, "b", {"k": 3})]
    conds = cd.conditions_from_graphs(graphs, True, ("k",))
    assert conds.classes == ("a", "b") and conds.dim == 4
    name, mean, std = conds.properties[0]
    assert name == "k" and mean == pytest.approx(3.0) and std == pytest.approx(np.std([2, 4, 3]))
    np.testing.assert_allclose(cd.encode(conds, "b", {"k": 3}), [0, 1, 0, 1])
    np.testing.assert_allclose(cd.encode(conds), np.zeros(4))        # the null condition
    enc = cd.encode_graphs(conds, graphs)
    chex.assert_shape(enc, (3, 4))
    np.testing.assert_allclose(enc[:, -1], 1.0)
    assert list(conds.node_counts["b"].counts) == [5, 6]
    assert cd.Conditions.from_dict(json.loads(json.dumps(conds.to_dict()))).to_dict() == conds.to_dict()
    assert cd.conditions_from_graphs(graphs, False, ()) is None


def test_labels_match_as_text():
    conds = cd.conditions_from_graphs([_labelled(4, 3), _labelled(4, 5)], True, ())
    np.testing.assert_allclose(cd.encode(conds, "3"), cd.encode(conds, 3))


@pytest.mark.parametrize("kwargs,match", [
    (dict(label="c"), r"label 'c' was not seen in training \(classes: a, b\)"),
    (dict(label="a", properties={"x": 1}), r"property 'x': the model was not trained on it"),
    (dict(label="a", properties={}), None),
    (dict(properties={"k": 1}), "a label is needed"),
])
def test_encoding_errors_name_the_value(kwargs, match):
    conds = cd.conditions_from_graphs([_labelled(4, "a", {"k": 1}), _labelled(4, "b", {"k": 2})],
                                      True, ("k",))
    with pytest.raises(cd.ConditionError, match=match or "property 'k' is needed"):
        cd.encode(conds, **kwargs)


def test_missing_training_labels_name_the_graph():
    graphs = [_labelled(4, "a", {"k": 1}), _labelled(4), _labelled(4, "b")]
    with pytest.raises(cd.ConditionError, match=r"data.json: graph 11 has no 'label'"):
        cd.conditions_from_graphs(graphs, True, (), source="data.json", indices=[10, 11, 12])
    with pytest.raises(cd.ConditionError, match=r"graph 2 has no property 'k'"):
        cd.conditions_from_graphs(graphs[::2], False, ("k",), indices=[0, 2])


# ---------------------------------------------------------------------------- dropout


def test_label_dropout_drops_whole_rows_at_its_rate():
    keys = jax.random.split(jax.random.key(0), 4000)
    cond = jnp.ones((4000, 3))
    out = np.asarray(cd.drop_conditions(cond, keys, 0.25))
    row_kept = out.all(axis=1)
    assert np.all(row_kept | (out == 0).all(axis=1))
    assert abs((~row_kept).mean() - 0.25) < 0.03
    assert cd.drop_conditions(cond, keys, 0.0) is cond
    np.testing.assert_array_equal(out, cd.drop_conditions(cond, keys, 0.25))  # per key


# ---------------------------------------------------------------------------- denoisers


@pytest.mark.parametrize("name", ["ppgn", "edp"])
def test_conditioned_denoisers(name):
    """The condition changes the output; the conditioned model stays permutation
    equivariant and padding invariant; cond=None is the null condition (zeros)."""
    kw = dict(hidden=8, num_blocks=2) if name == "ppgn" else dict(num_layers=2, gin_steps=2,
                                                                   channels=2, hidden=8)
    model = build_model(name, 8, cond_dim=3, **kw)
    params = init_params(model, jax.random.key(0), 9)
    adj, mask = random_batch(1, [6, 9], 9)
    t, s = jnp.array([3, 5]), jnp.array([0.3, 0.6])
    c = jnp.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    out = model.apply(params, adj, mask, t, s, c)
    other = model.apply(params, adj, mask, t, s, c[::-1])
    assert not np.allclose(out, other, atol=1e-4)
    np.testing.assert_allclose(model.apply(params, adj, mask, t, s),
                               model.apply(params, adj, mask, t, s, jnp.zeros((2, 3))))
    perm = np.random.default_rng(0).permutation(9)
    p_adj = adj[1][perm][:, perm][None]
    outp = model.apply(params, p_adj, mask[1:], t[1:], s[1:], c[1:])
    np.testing.assert_allclose(outp[0], np.asarray(out[1])[perm][:, perm], atol=1e-4)
    padded = np.zeros((1, 12, 12), np.float32)
    padded[0, :6, :6] = adj[0, :6, :6]
    pmask = np.zeros((1, 12), bool)
    pmask[0, :6] = True
    outpad = model.apply(params, padded, pmask, t[:1], s[:1], c[:1])
    np.testing.assert_allclose(outpad[0, :6, :6], out[0, :6, :6], atol=1e-4)


def test_unconditional_model_refuses_a_condition():
    model = build_model("ppgn", 8, hidden=8, num_blocks=1)
    params = init_params(model, jax.random.key(0), 5)
    adj, mask = random_batch(0, [5], 5)
    with pytest.raises(ValueError, match="unconditional"):
        model.apply(params, adj, mask, 1, 0.5, jnp.zeros((1, 2)))
    assert "cond" not in params["params"]


# ---------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def conditional_run(tmp_path_factory):
    """A tiny PPGN trained on two labelled families (ladders and stars, 6-9 nodes)."""
    from configs import test as test_config
    from ddgjax.data import write_graph_list

    d = tmp_path_factory.mktemp("cond")
    graphs = []
    for i in range(24):
        n = 6 + i % 4
        g = nx.star_graph(n - 1) if i % 2 else nx.ladder_graph(n // 2)
        g = nx.convert_node_labels_to_integers(g)
        g.graph["label"] = "star" if i % 2 else "ladder"
        g.graph["properties"] = {"size": float(g.number_of_nodes())}
        graphs.append(g)
    data = d / "families.json"
    write_graph_list(data, graphs, split={"train": list(range(4, 24)), "test": list(range(4))})
    cfg = test_config.get_config()
    cfg.data.source = str(data)
    cfg.condition.on = "label"
    cfg.condition.dropout = 0.2
    cfg.train.num_epochs = 2
    ddgjax.train(cfg, str(d / "run"), verbose=False)
    return str(d / "run")


def test_conditional_run_records_its_conditions(conditional_run):
    run = load_run(conditional_run)
    assert run.conditions.classes == ("ladder", "star")
    assert run.model.cond_dim == 3
    counts = run.conditions.node_counts["star"]
    assert set(counts.counts) <= {6, 7, 8, 9}


def test_dropped_label_without_guidance_is_the_unconditional_sampler(conditional_run):
    """No label, w = 0: exactly the sampler of the model called with the null condition
    (what label dropout trains), graph for graph."""
    from ddgjax.graphs import node_mask_from_counts
    from ddgjax.sampling import graph_keys_at

    run = load_run(conditional_run)
    res = generate(run, 6, seed=3, batch_size=6, node_counts=np.full(6, 8))
    null = jnp.zeros((6, 3))
    denoise = lambda a, m, t, s: run.model.apply(run.params, a, m, t, s, null)
    mask = node_mask_from_counts(np.full(6, 8), run.max_nodes)
    s = run.process.sampler(run.config.sample.num_steps or None)
    ref = np.asarray(s(denoise, graph_keys_at(3, np.arange(6)), jnp.asarray(mask)))
    np.testing.assert_array_equal(res["adj"], ref.astype(np.uint8))


def test_sampling_by_label(conditional_run, tmp_path):
    """A label, guidance: the node counts are that class's; the request is recorded; bad
    requests are one-line errors."""
    model = ddgjax.load(conditional_run)
    gs = model.sample(8, seed=0, label="star", guidance=1.0)
    assert len(gs) == 8
    run = model.run
    res = generate(run, 4, seed=0, batch_size=4, label="ladder", guidance=0.5)
    assert res["sampler"]["label"] == "ladder" and res["sampler"]["guidance"] == 0.5
    with pytest.raises(SamplingError, match="label 'cycle' was not seen in training"):
        generate(run, 2, label="cycle")
    with pytest.raises(SamplingError, match="needs a label or properties"):
        generate(run, 2, guidance=1.0)
    from ddgjax.cli import sample as sample_cli
    out = tmp_path / "s"
    code = sample_cli.main(["ddgjax-sample", "--workdir", conditional_run, "--label", "star",
                            "--guidance", "2", "--num_samples", "4", "--out", str(out),
                            "--protocol", "none", "--quiet"])
    assert code == 0
    rec = json.load(open(out / "samples.json"))["generated_by"]
    assert rec["sampler"]["label"] == "star" and rec["sampler"]["guidance"] == 2.0
    assert sample_cli.main(["ddgjax-sample", "--workdir", conditional_run, "--property",
                            "size", "--out", str(tmp_path / "t"), "--quiet"]) == 1


def test_unconditional_run_refuses_labels():
    from ddgjax.pretrained import load_pretrained

    run = load_pretrained("community_small")
    assert run.conditions is None
    with pytest.raises(SamplingError, match="trained without labels"):
        generate(run, 2, label="a")
    with pytest.raises(SamplingError, match="trained without labels"):
        generate(run, 2, guidance=1.0)


def test_samples_of_a_class_are_scored_against_that_class():
    from ddgjax.sample_writer import of_class

    graphs = [_labelled(4, "a"), _labelled(5, "b"), _labelled(6, "a")]
    assert [g.number_of_nodes() for g in of_class(graphs, "a")] == [4, 6]
    unlabelled = [_labelled(4), _labelled(5)]
    assert of_class(unlabelled, "a") == unlabelled and of_class(None, "a") is None
