"""benchmarks/sbm_seed_selection.py: the best validation evaluation of a training log (the
rule ``best_val`` uses), Spearman's rho with ties, and the join of logs and scored files."""
import json
import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import sbm_seed_selection as sel  # noqa: E402


def write_log(path, evals):
    """A training log with a step record between ``(epoch, valid, avg)`` evaluations."""
    with open(path, "w") as f:
        for epoch, valid, avg in evals:
            f.write(json.dumps({"epoch": epoch, "loss": 0.1}) + "\n")
            f.write(json.dumps({"epoch": epoch, "validation": {"valid": valid, "avg": avg}})
                    + "\n")


def write_scores(path, vuns):
    files = {f"/x/run_seed{k}.json": {"vun": v} for k, v in enumerate(vuns)}
    files["/x/run_T1024_seed0.json"] = {"vun": 1.0}    # 1024-step files are left out
    with open(path, "w") as f:
        json.dump({"files": files}, f)


def test_best_validation_takes_the_highest_validity_then_the_lower_mmd(tmp_path):
    log = tmp_path / "metrics_a.jsonl"
    write_log(log, [(250, 0.5, 0.2), (500, 0.6, 0.3), (750, 0.6, 0.1), (1000, 0.4, 0.05)])
    assert sel.best_validation(str(log)) == (750, 0.6, 4)
    write_log(log, [])
    with pytest.raises(ValueError, match="no validation evaluation"):
        sel.best_validation(str(log))


def brute_spearman(a, b):
    """Pearson of average ranks, ranks by counting (float64)."""
    def ranks(x):
        x = np.asarray(x, float)
        return np.array([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x])
    return np.corrcoef(ranks(a), ranks(b))[0, 1]


def test_rank_correlation_against_brute_force():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, size=12)          # many ties
    b = rng.normal(size=12)
    assert sel.rank_correlation(a, b) == pytest.approx(brute_spearman(a, b), abs=1e-12)
    assert sel.rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_collect_joins_logs_with_their_scores_and_the_rule_keeps_the_best_validation(tmp_path, capsys):
    for name, evals, vuns in (("a", [(500, 0.7, 0.1)], [0.5, 0.6]),
                              ("b", [(500, 0.5, 0.1), (1000, 0.6, 0.1)], [0.8, 0.7]),
                              ("c", [(500, 0.9, 0.1)], None)):       # not scored: left out
        write_log(tmp_path / f"metrics_{name}.jsonl", evals)
        if vuns is not None:
            write_scores(tmp_path / f"{name}_ourfit.json", vuns)
    rows = sel.collect([str(tmp_path)])
    assert [(r["name"], r["val_valid"], r["test_vun_ourfit"]) for r in rows] == [
        ("a", 0.7, pytest.approx(0.55)), ("b", 0.6, pytest.approx(0.75))]
    out = tmp_path / "sel.json"
    sel.main([str(tmp_path), "--out", str(out)])
    summary = json.loads(out.read_text())
    assert summary["kept_by_validation"] == "a" and summary["runs"] == 2
    assert summary["spearman_val_vs_test"] == pytest.approx(-1.0)
    assert "kept by validation: a" in capsys.readouterr().out
    assert [r["name"] for r in sel.collect([str(tmp_path)], only={"b"})] == ["b"]
