"""Autoguidance (ddgjax.guidance): the combined output, no-op cases, one compile per
guide, refusals by name, and the sample command end to end."""
import dataclasses
import json

import numpy as np
import pytest

from configs import test as test_config
from ddgjax import sampling, training
from ddgjax.cli import sample as sample_cli
from ddgjax.guidance import AutoGuidedDenoiser, guided_run
from ddgjax.processes import gaussian

from helpers import random_batch


def tiny_config(seed: int, hidden: int):
    cfg = test_config.get_config()
    cfg.train.num_epochs = 2
    cfg.train.seed = seed
    cfg.model.ppgn.hidden = hidden
    return cfg


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(good, guide) workdirs: the test config, and a narrower run with another seed."""
    root = tmp_path_factory.mktemp("guidance")
    good, guide = root / "good", root / "guide"
    training.train(tiny_config(0, 8), str(good), verbose=False)
    training.train(tiny_config(1, 4), str(guide), verbose=False)
    return good, guide


def draws(run, *weighted, num=6, seed=2):
    """``[B, N, N]`` samples (4 steps) of ``run`` alone, then of ``run`` guided by each
    ``(guide, weight)`` of ``weighted``."""
    runs = [run] + [guided_run(run, guide, w) for guide, w in weighted]
    return [sampling.generate(r, num, seed=seed, batch_size=num, num_steps=4)["adj"]
            for r in runs]


def outputs(runs, levels, seed=0):
    """``(good, bad, inputs, a, b)``: the two loaded runs, denoiser inputs for three graphs
    at ``levels`` (beta_bar), and each run's output on them (float64)."""
    good = sampling.load_run(str(runs[0]), "latest")
    bad = sampling.load_run(str(runs[1]), "latest")
    adj, mask = random_batch(seed, [5, 9, 20], good.max_nodes)
    inputs = (adj, mask, np.array([3, 1, 7], np.int32), np.array(levels, np.float32))
    a = np.asarray(good.model.apply(good.params, *inputs), np.float64)
    b = np.asarray(bad.model.apply(bad.params, *inputs), np.float64)
    return good, bad, inputs, a, b


def test_guided_output_is_good_plus_weight_times_difference(runs):
    good, bad, inputs, a, b = outputs(runs, [0.3, 0.05, 0.45])
    run = guided_run(good, bad, 0.75)
    out = np.asarray(run.model.apply(run.params, *inputs), np.float64)
    assert out.shape == a.shape == (3, good.max_nodes, good.max_nodes)
    np.testing.assert_allclose(out, a + 0.75 * (a - b), rtol=1e-5, atol=1e-5)
    assert np.abs(a - b).max() > 1e-3  # the two models differ, so the check can fail
    # negative weights blend: -1/2 the mean of both (an ensemble), -1 the other model
    mean = guided_run(good, bad, -0.5)
    np.testing.assert_allclose(np.asarray(mean.model.apply(mean.params, *inputs)),
                               (a + b) / 2, rtol=1e-5, atol=1e-5)
    other = guided_run(good, bad, -1.0)
    np.testing.assert_allclose(np.asarray(other.model.apply(other.params, *inputs)),
                               b, rtol=1e-5, atol=1e-5)


def test_guidance_interval_guides_only_graphs_at_or_above_the_level(runs):
    good, bad, inputs, a, b = outputs(runs, [0.3, 0.05, 0.2], seed=1)
    run = guided_run(good, bad, 1.5, above=0.2)
    out = np.asarray(run.model.apply(run.params, *inputs), np.float64)
    want = a + 1.5 * np.array([1.0, 0.0, 1.0])[:, None, None] * (a - b)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert run.meta["guidance"]["above"] == 0.2
    plain = sampling.generate(good, 4, seed=5, batch_size=4, num_steps=4)["adj"]
    # 4 steps start at beta_bar 0.5, 0.375, 0.25, 0.125: above 0.3 guides the first two
    some = sampling.generate(guided_run(good, bad, 3.0, above=0.3), 4, seed=5, batch_size=4,
                             num_steps=4)["adj"]
    every = sampling.generate(guided_run(good, bad, 3.0), 4, seed=5, batch_size=4,
                              num_steps=4)["adj"]
    assert (some != plain).any() and (some != every).any()  # the sampler reads the interval


def test_weight_zero_and_self_guidance_sample_the_run_alone(runs):
    good = sampling.load_run(str(runs[0]), "latest")
    bad = sampling.load_run(str(runs[1]), "latest")
    plain, zero, itself, strong = draws(good, (bad, 0.0), (good, 2.0), (bad, 4.0))
    np.testing.assert_array_equal(zero, plain)
    np.testing.assert_array_equal(itself, plain)
    assert (strong != plain).any()


def test_weights_share_one_compile(runs):
    good = sampling.load_run(str(runs[0]), "latest")
    bad = sampling.load_run(str(runs[1]), "latest")
    first = sampling.generate(guided_run(good, bad, 0.3), 4, seed=0, batch_size=4,
                              num_steps=3)
    again = sampling.generate(guided_run(good, bad, 1.7), 4, seed=0, batch_size=4,
                              num_steps=3)
    assert again["compile_seconds"] == 0.0  # the second weight reuses the executable
    assert len(first["adj"]) == len(again["adj"]) == 4


def test_guide_record_and_model_are_hashable(runs):
    good = sampling.load_run(str(runs[0]), "latest")
    bad = sampling.load_run(str(runs[1]), "latest")
    run = guided_run(good, bad, 0.5)
    assert isinstance(run.model, AutoGuidedDenoiser) and hash(run.model) is not None
    assert run.meta["guidance"]["weight"] == 0.5
    assert run.meta["guidance"]["guide_meta"]["epoch"] == 2
    assert run.meta["epoch"] == good.meta["epoch"]


@pytest.mark.parametrize("change, expected", [
    ("num_timesteps", "num_timesteps"),
    ("prior_density", "prior_density"),
    ("max_nodes", "max_nodes"),
    ("source", "data.source"),
    ("digest", "trained on other graphs"),
    ("weight -1.5", "--guidance"),
    ("weight nan", "--guidance"),
    ("weight text", "--guidance"),
    ("above 0.7", "--guidance_above"),
    ("above -0.1", "--guidance_above"),
    ("above gaussian", "--guidance_above"),
    ("process kind", "noise process is GaussianProcess"),
    ("self_condition", "self_condition"),
])
def test_incompatible_guide_or_bad_weight_is_refused_by_name(runs, change, expected):
    good = sampling.load_run(str(runs[0]), "latest")
    bad = sampling.load_run(str(runs[1]), "latest")
    weight, above = 0.5, 0.0
    if change == "num_timesteps":
        bad = bad._replace(process=dataclasses.replace(bad.process, num_timesteps=5))
    elif change == "prior_density":
        bad = bad._replace(process=dataclasses.replace(bad.process, prior_density=0.25))
    elif change == "max_nodes":
        bad = bad._replace(max_nodes=bad.max_nodes + 4)
    elif change == "source":
        cfg = bad.config.copy_and_resolve_references()
        cfg.data.source = "planar_60"
        bad = bad._replace(config=cfg)
    elif change == "digest":          # the same source name, other graphs
        assert good.train_digest == bad.train_digest and good.train_digest
        bad = bad._replace(train_digest="0" * 16)
    elif change == "process kind":
        bad = bad._replace(process=gaussian.GaussianProcess())
    elif change == "self_condition":
        bad = bad._replace(process=dataclasses.replace(bad.process, self_condition=True))
    elif change.startswith("above"):
        above = {"above 0.7": 0.7, "above -0.1": -0.1, "above gaussian": 0.1}[change]
        if change == "above gaussian":
            good = good._replace(process=gaussian.GaussianProcess())
            bad = bad._replace(process=gaussian.GaussianProcess())
    else:
        weight = {"weight -1.5": -1.5, "weight nan": float("nan"), "weight text": "x"}[change]
    with pytest.raises(sampling.SamplingError, match=expected):
        guided_run(good, bad, weight, above=above)


def test_sample_command_with_a_guide(runs, tmp_path, capsys):
    good, guide = runs
    out = tmp_path / "out"
    code = sample_cli.main(["ddgjax-sample", f"--workdir={good}", f"--guide={guide}",
                            "--guidance=0.5", "--guidance_above=0.05", "--num_samples=4", "--batch_size=4",
                            "--num_steps=3", "--protocol=none", "--quiet", f"--out={out}"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((out / "samples.json").read_text())
    info = record["generated_by"]
    assert info["guidance"] == 0.5 and info["guide"] == str(guide)
    assert info["guidance_above"] == 0.05
    assert info["guide_checkpoint"] == "latest" and info["guide_epoch"] == 2
    assert len(record["graphs"]) == 4
    # --guidance without --guide (and the reverse) fail before anything loads, by name
    for args, expected in ((["--guidance=0.5"], "--guidance: needs --guide"),
                           ([f"--guide={guide}"], "--guidance 0.5")):
        code = sample_cli.main(["ddgjax-sample", f"--workdir={good}", *args,
                                f"--out={tmp_path / 'x'}", "--quiet"])
        assert code == 1
        assert expected in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    # a guide directory that holds no run is refused, naming the flag
    code = sample_cli.main(["ddgjax-sample", f"--workdir={good}", f"--guide={tmp_path}",
                            "--guidance=1", f"--out={tmp_path / 'y'}", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and f"--guide {tmp_path} (--guide_checkpoint latest)" in err
    # --guidance_above alone, and any guide flag with --complete, are refused by name
    for args, expected in ((["--guidance_above=0.1"], "--guidance_above: needs --guide"),
                           ([f"--guide={guide}", "--guidance=1", "--complete=ego_small:test",
                             "--hide=0.3"], "graph completion (--complete) does not take it")):
        code = sample_cli.main(["ddgjax-sample", f"--workdir={good}", *args,
                                f"--out={tmp_path / 'z'}", "--quiet"])
        assert code == 1
        assert expected in capsys.readouterr().err


def test_trained_model_guided_by_samples_like_the_guided_run(runs):
    import ddgjax

    good, weak = ddgjax.load(str(runs[0]), "latest"), ddgjax.load(str(runs[1]), "latest")
    guided = good.guided_by(weak, 0.8, above=0.05)
    assert "guided_by=" in repr(guided) and guided.guide[1] == 0.8
    want = sampling.generate(guided_run(good.run, weak.run, 0.8, above=0.05), 5, seed=4,
                             batch_size=5, num_steps=3)
    got = guided.sample(5, seed=4, num_steps=3, batch_size=5)
    assert [sorted(g.edges()) for g in got] == [sorted(g.edges()) for g in want["graphs"]]
    assert good.guide is None  # the unguided model is unchanged
    with pytest.raises(sampling.SamplingError, match="samples only"):
        guided.elbo([got[0]])
    with pytest.raises(sampling.SamplingError, match="samples only"):
        guided.complete(np.zeros((4, 4)), np.ones((4, 4), bool))
    with pytest.raises(sampling.SamplingError, match="--guidance"):
        good.guided_by(weak, -2.0)
    with pytest.raises(sampling.SamplingError, match="expected the weak model as a TrainedModel"):
        good.guided_by(str(runs[1]), 0.5)


@pytest.mark.parametrize("kind", ["gaussian", "self_conditioned"])
def test_other_processes_and_self_conditioning_take_guidance(kind, tmp_path):
    """The Gaussian baseline (noise estimates) and a self-conditioned PPGN (an estimate
    input) sample through the guided denoiser too: weight 0 gives the run's own samples,
    and a weight against a narrower run changes them."""
    cfgs = [tiny_config(seed, hidden) for seed, hidden in ((0, 8), (1, 4))]
    for cfg in cfgs:
        if kind == "gaussian":
            cfg.diffusion.kind, cfg.diffusion.num_timesteps = "gaussian", 12
        else:
            cfg.model.ppgn.self_condition = True
    for name, cfg in zip(("good", "weak"), cfgs):
        training.train(cfg, str(tmp_path / name), verbose=False)
    good = sampling.load_run(str(tmp_path / "good"), "latest")
    weak = sampling.load_run(str(tmp_path / "weak"), "latest")
    plain, zero, strong = draws(good, (weak, 0.0), (weak, 4.0), num=4, seed=1)
    np.testing.assert_array_equal(zero, plain)
    assert (strong != plain).any()
