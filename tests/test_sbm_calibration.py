"""benchmarks/sbm_calibration.py: the affine refit of a denoiser's logits, against brute force,
and the probe end to end on a tiny trained run."""
import json
import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import sbm_calibration  # noqa: E402


def test_fit_affine_recovers_the_generating_map_and_beats_a_grid():
    """Labels drawn from sigmoid(a* x + b*): the Newton fit lands near (a*, b*), and no point
    of a fine (a, b) grid has a lower cross-entropy than the fit (float64 brute force)."""
    rng = np.random.default_rng(0)
    x = rng.normal(-2.0, 1.5, size=200_000)
    a_true, b_true = 0.7, -0.4
    y = (rng.random(x.shape) < 1 / (1 + np.exp(-(a_true * x + b_true)))).astype(np.float64)
    a, b = sbm_calibration.fit_affine(x, y)
    assert abs(a - a_true) < 0.02 and abs(b - b_true) < 0.04
    best = sbm_calibration.bce(x, y, a, b)
    grid = [sbm_calibration.bce(x, y, ga, gb) for ga in np.linspace(0.6, 0.8, 21)
            for gb in np.linspace(-0.5, -0.3, 21)]
    assert best <= min(grid) + 1e-12
    assert best < sbm_calibration.bce(x, y)          # the identity map is worse
    # a calibrated model: the fit is the identity
    y2 = (rng.random(x.shape) < 1 / (1 + np.exp(-x))).astype(np.float64)
    a2, b2 = sbm_calibration.fit_affine(x, y2)
    assert abs(a2 - 1.0) < 0.02 and abs(b2) < 0.04


def test_probe_runs_on_a_tiny_run(tmp_path, monkeypatch):
    """The probe loads a trained run, noises a split's graphs and writes one row per level;
    an empty split is a clear error (the test config has no validation graphs)."""
    from configs import test as test_config
    from ddgjax import training

    cfg = test_config.get_config()
    cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 1, 1
    wd = str(tmp_path / "run")
    training.train(cfg, wd, verbose=False)
    out = tmp_path / "cal.json"
    monkeypatch.setattr(sys, "argv", ["sbm_calibration.py", "--workdir", wd, "--checkpoint",
                                      "latest", "--split", "train", "--levels", "0.1,0.5",
                                      "--num_graphs", "3", "--out", str(out)])
    sbm_calibration.main()
    got = json.loads(out.read_text())
    assert got["graphs"] == 3 and [r["beta_bar"] for r in got["rows"]] == [0.1, 0.5]
    for r in got["rows"]:
        assert r["bce_recalibrated"] <= r["bce"] + 1e-12 and 0 < r["edge_rate"] < 1
    argv = [a if a != "train" else "val" for a in sys.argv]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="the val split has no graphs"):
        sbm_calibration.main()
