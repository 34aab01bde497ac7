"""Ensembles (ddgjax.ensemble): the averaged output against float64 brute force, the
one-member and self-ensemble cases, refusals by name, and the sample command end to end."""
import dataclasses
import json

import numpy as np
import pytest

from configs import test as test_config
from ddgjax import sampling, training
from ddgjax.cli import sample as sample_cli
from ddgjax.ensemble import (EnsembleDenoiser, ensemble_run, mean_of_probabilities_logit,
                             parse_workdirs)
from ddgjax.guidance import guided_run
from ddgjax.processes import gaussian

from helpers import random_batch


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three workdirs of the test config: seeds 0 and 1 at width 8, seed 2 at width 4."""
    root = tmp_path_factory.mktemp("ensemble")
    dirs = [root / "a", root / "b", root / "c"]
    for d, (seed, hidden) in zip(dirs, ((0, 8), (1, 8), (2, 4))):
        cfg = test_config.get_config()
        cfg.train.num_epochs = 2
        cfg.train.seed = seed
        cfg.model.ppgn.hidden = hidden
        training.train(cfg, str(d), verbose=False)
    return dirs


def loaded(runs):
    return [sampling.load_run(str(d), "latest") for d in runs]


def inputs_for(run, seed=0):
    adj, mask = random_batch(seed, [5, 9, 20], run.max_nodes)
    return (adj, mask, np.array([3, 1, 7], np.int32), np.array([0.3, 0.05, 0.45], np.float32))


def brute_mean_probs_logit(logits):
    """float64: log(mean p) - log(1 - mean p)."""
    p = 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))
    m = p.mean(axis=0)
    return np.log(m) - np.log1p(-m)


def test_mean_of_probabilities_logit_against_brute_force():
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 4.0, size=(3, 7, 5)).astype(np.float32)
    got = np.asarray(mean_of_probabilities_logit(logits), np.float64)
    np.testing.assert_allclose(got, brute_mean_probs_logit(logits), rtol=1e-5, atol=1e-5)
    # one member: its own logits; the mixture differs from the logit mean
    np.testing.assert_allclose(np.asarray(mean_of_probabilities_logit(logits[:1])),
                               logits[0], rtol=1e-5, atol=1e-5)
    assert np.abs(got - logits.mean(axis=0)).max() > 0.1
    # where float32 probabilities round to 0 or 1 the result stays finite and exact:
    # two members at +40 and +60 mix to p = 1 - (e^-40 + e^-60) / 2
    extreme = np.array([[40.0, -40.0], [60.0, -60.0]], np.float32)
    got = np.asarray(mean_of_probabilities_logit(extreme), np.float64)
    want_pos = -np.log((np.exp(-40.0) + np.exp(-60.0)) / 2)
    np.testing.assert_allclose(got, [want_pos, -want_pos], rtol=1e-5)


@pytest.mark.parametrize("mean", ["probs", "logits"])
def test_ensemble_output_is_the_average_of_its_members(runs, mean):
    a, b, c = loaded(runs)
    inputs = inputs_for(a)
    outs = np.stack([np.asarray(r.model.apply(r.params, *inputs), np.float64) for r in (a, b, c)])
    assert np.abs(outs[0] - outs[1]).max() > 1e-3  # the members differ: the check can fail
    run = ensemble_run(a, [b, c], mean)
    got = np.asarray(run.model.apply(run.params, *inputs), np.float64)
    assert got.shape == outs[0].shape == (3, a.max_nodes, a.max_nodes)
    want = brute_mean_probs_logit(outs) if mean == "probs" else outs.mean(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the order of the members does not matter
    other = ensemble_run(c, [a, b], mean)
    np.testing.assert_allclose(np.asarray(other.model.apply(other.params, *inputs)), got,
                               rtol=1e-5, atol=1e-5)
    assert run.meta["ensemble"]["mean"] == mean and run.meta["ensemble"]["size"] == 3
    assert isinstance(run.model, EnsembleDenoiser) and hash(run.model) is not None


def test_two_member_logit_mean_is_guidance_at_minus_one_half(runs):
    a, b, _ = loaded(runs)
    inputs = inputs_for(a, seed=1)
    ens = ensemble_run(a, [b], "logits")
    blend = guided_run(a, b, -0.5)
    np.testing.assert_allclose(np.asarray(ens.model.apply(ens.params, *inputs)),
                               np.asarray(blend.model.apply(blend.params, *inputs)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mean", ["probs", "logits"])
def test_a_run_ensembled_with_itself_samples_as_the_run_alone(runs, mean):
    a, b, _ = loaded(runs)
    kw = dict(seed=3, batch_size=4, num_steps=4)
    plain = sampling.generate(a, 4, **kw)["adj"]
    itself = sampling.generate(ensemble_run(a, [a, a], mean), 4, **kw)["adj"]
    np.testing.assert_array_equal(itself, plain)
    mixed = sampling.generate(ensemble_run(a, [b], mean), 4, **kw)["adj"]
    assert (mixed != plain).any()


@pytest.mark.parametrize("change, expected", [
    ("no others", "at least one run besides"),
    ("mean", "--ensemble_mean"),
    ("gaussian", "bit-flip denoiser"),
    ("num_timesteps", "ensemble member 2: its process has num_timesteps"),
    ("max_nodes", "max_nodes"),
])
def test_bad_ensembles_are_refused_by_name(runs, change, expected):
    a, b, _ = loaded(runs)
    others, mean = [b], "probs"
    if change == "no others":
        others = []
    elif change == "mean":
        mean = "median"
    elif change == "gaussian":
        a = a._replace(process=gaussian.GaussianProcess())
        others = [b._replace(process=gaussian.GaussianProcess())]
    elif change == "num_timesteps":
        others = [b._replace(process=dataclasses.replace(b.process, num_timesteps=5))]
    else:
        others = [b._replace(max_nodes=b.max_nodes + 4)]
    with pytest.raises(sampling.SamplingError, match=expected):
        ensemble_run(a, others, mean)


def test_parse_workdirs():
    assert parse_workdirs(None) == []
    assert parse_workdirs("x, y") == ["x", "y"]
    for bad in ("", "x,,y", "x,"):
        with pytest.raises(ValueError, match="--ensemble"):
            parse_workdirs(bad)


def test_sample_command_with_an_ensemble(runs, tmp_path, capsys):
    a, b, c = runs
    out = tmp_path / "out"
    code = sample_cli.main(["ddgjax-sample", f"--workdir={a}", f"--ensemble={b},{c}",
                            "--ensemble_mean=logits", "--checkpoint=latest", "--num_samples=4",
                            "--batch_size=4", "--num_steps=3", "--protocol=none", "--quiet",
                            f"--out={out}"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((out / "samples.json").read_text())
    info = record["generated_by"]
    assert info["ensemble"] == [str(b), str(c)] and info["ensemble_mean"] == "logits"
    assert info["ensemble_epochs"] == [2, 2]
    assert len(record["graphs"]) == 4
    # refused by name before anything is written: with --guide, an empty entry, a member
    # that holds no run, and with --complete
    for args, expected in (
            ([f"--ensemble={b}", f"--guide={c}", "--guidance=1"], "--ensemble and --guide"),
            ([f"--ensemble={b},"], "--ensemble: expected comma-separated workdirs"),
            ([f"--ensemble={tmp_path}"], f"--ensemble {tmp_path} (--checkpoint latest)"),
            ([f"--ensemble={b}", "--complete=ego_small:test", "--hide=0.3"],
             "graph completion (--complete) does not take it")):
        code = sample_cli.main(["ddgjax-sample", f"--workdir={a}", "--checkpoint=latest", *args,
                                f"--out={tmp_path / 'x'}", "--quiet"])
        assert code == 1
        assert expected in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_python_api_ensembled_with(runs):
    import ddgjax

    a, b = (ddgjax.load(str(d), "latest") for d in runs[:2])
    ens = a.ensembled_with(b)
    assert "ensembled_with" in repr(ens) and "'probs'" in repr(ens)
    graphs = ens.sample(4, seed=1, num_steps=3, batch_size=4)
    want = sampling.generate(ensemble_run(a.run, [b.run]), 4, seed=1, batch_size=4,
                             num_steps=3)["graphs"]
    assert [sorted(g.edges) for g in graphs] == [sorted(g.edges) for g in want]
    with pytest.raises(sampling.SamplingError, match="ensembled_with"):
        ens.elbo([np.zeros((5, 5), np.uint8)])
    with pytest.raises(sampling.SamplingError, match="expected TrainedModels"):
        a.ensembled_with(b.run)
    with pytest.raises(sampling.SamplingError, match="guided_by"):
        a.ensembled_with(b.guided_by(a, 0.5))


def test_vun_eval_with_an_ensemble(runs, tmp_path, monkeypatch):
    """benchmarks/vun_eval.py --ensemble samples the ensemble and records its members."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
    import vun_eval

    a, b, c = runs
    monkeypatch.setattr(sys, "argv", [
        "vun_eval.py", f"--workdir={a}", f"--ensemble={b},{c}", "--checkpoint=latest",
        "--validity=none", "--protocol=none", "--seeds=1", "--num_samples=3",
        "--num_steps=3", "--name=ens", f"--out={tmp_path}"])
    vun_eval.main()
    out = json.loads((tmp_path / "ens_vun.json").read_text())
    assert out["ensemble"] == {"ensemble": [str(b), str(c)], "ensemble_mean": "probs",
                               "ensemble_epochs": [2, 2]}
    graphs = json.loads((tmp_path / "ens_seed0.json").read_text())
    assert graphs["generated_by"]["ensemble"] == [str(b), str(c)]
    assert len(graphs["graphs"]) == 3
