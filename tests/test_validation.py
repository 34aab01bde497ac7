"""Model selection by samples: the reference graphs, the ranking, the config checks, and
a tiny training run that keeps the best-scoring checkpoint as ``best_val``."""
import json

import networkx as nx
import pytest

from configs import test as test_config
from ddgjax import checkpoints, training
from ddgjax.data import Dataset
from ddgjax.sampling import generate, load_run
from ddgjax.validation import (check_validation_config, score_graphs, selection_key,
                               validation_reference)


def test_reference_is_the_val_split_or_a_training_slice():
    g = [nx.path_graph(k) for k in range(3, 9)]
    with_val = Dataset("d", source="x", train=g[:3], test=g[3:4], val=g[4:])
    assert validation_reference(with_val, 2) == (g[4:], "val")
    no_val = Dataset("d", source="x", train=g[:3], test=g[3:], val=[])
    assert validation_reference(no_val, 2) == (g[:2], "train[:2]")
    assert validation_reference(no_val, 10) == (g[:3], "train[:3]")


def test_selection_key_orders_by_metric():
    a = {"avg": 0.01, "valid": 0.5}
    b = {"avg": 0.02, "valid": 0.9}
    assert selection_key(a, "mmd") < selection_key(b, "mmd")
    assert selection_key(b, "valid") < selection_key(a, "valid")
    assert selection_key({"avg": float("nan")}, "mmd") > selection_key(b, "mmd")
    with pytest.raises(ValueError, match="config.validation.metric"):
        selection_key(a, "loss")


def test_score_graphs_counts_valid_graphs():
    planar = [nx.cycle_graph(6), nx.complete_graph(4)]
    bad = [nx.complete_graph(5), nx.disjoint_union(nx.path_graph(2), nx.path_graph(2))]  # non-planar; disconnected
    s = score_graphs(planar + bad, planar, validity="planar")
    assert s["valid"] == 0.5 and set(s) == {"degree", "clustering", "orbit", "avg", "valid"}


@pytest.mark.parametrize("field,value,match", [
    ("every_epochs", 3, "multiple of config.train.checkpoint_every_epochs"),
    ("num_samples", 0, "num_samples"),
    ("validity", "tree", "validity"),
    ("metric", "loss", "metric"),
])
def test_bad_validation_config(field, value, match):
    cfg = test_config.get_config()
    cfg.validation.every_epochs = 2
    cfg.validation[field] = value
    with pytest.raises(ValueError, match=match):
        check_validation_config(cfg)
    cfg = test_config.get_config()
    cfg.validation.every_epochs = 2
    cfg.validation.metric = "valid"
    with pytest.raises(ValueError, match="needs a rule"):
        check_validation_config(cfg)


def validated_config(metric: str):
    """The test config for 6 epochs, validated every 2 on 8 samples against 8 training
    graphs with the planar rule, selecting by ``metric``."""
    cfg = test_config.get_config()
    cfg.train.num_epochs = 6
    cfg.validation.update(every_epochs=2, num_samples=8, validity="planar", metric=metric)
    return cfg


def test_training_keeps_the_best_validation_checkpoint(tmp_path):
    cfg = validated_config("valid")
    cfg.sample.num_steps = 4  # validation samples like ddgjax-sample: 4 of the 8 levels
    wd = str(tmp_path / "run")
    training.train(cfg, wd, stop_after_epochs=4, verbose=False)
    training.train(cfg, wd, verbose=False)  # resumes; keeps comparing with the saved best
    records = [json.loads(l) for l in open(tmp_path / "run" / "metrics.jsonl")]
    val = [r for r in records if "validation" in r]
    assert [r["epoch"] for r in val] == [2, 4, 6]
    assert all(r["validation"]["reference"] == "train[:8]" for r in val)
    assert all(r["validation"]["num_steps"] == 4 for r in val)
    keys = [selection_key(r["validation"], "valid") for r in val]
    best_meta = checkpoints.restore_meta(wd, "best_val")
    best_epoch = val[keys.index(min(keys))]["epoch"]  # first of the ties, as saved
    assert best_meta["epoch"] == best_epoch
    assert tuple(best_meta["validation_key"]) == min(keys)
    run = load_run(wd, "best_val")
    assert run.meta["epoch"] == best_epoch
    assert len(generate(run, 4, seed=1)["graphs"]) == 4


class _InlinePool:
    """An executor that runs each task at once, in the caller's thread."""

    def submit(self, fn, *args):
        import concurrent.futures
        future = concurrent.futures.Future()
        future.set_result(fn(*args))
        return future


def test_background_scoring_selects_as_scoring_in_place(tmp_path, monkeypatch):
    """Validation scores its samples in a background thread while training goes on: the
    scoring of epoch 2's samples finishes only once epoch 3's loss is in the log (so the
    loop trained on past that boundary meanwhile), its record follows it, and the records
    and the best_val checkpoint equal those of a run that scores in place."""
    import threading
    import time

    from ddgjax import validation

    cfg = validated_config("mmd")
    cfg.train.checkpoint_every_epochs = 1
    timed = validation._timed_scores
    log = tmp_path / "background" / "metrics.jsonl"
    calls = []

    def after_epoch_3_is_logged(*args):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:  # epoch 2's scoring: wait for the loop to log epoch 3
            deadline = time.time() + 60
            while not any(json.loads(line).get("epoch") == 3 and "loss" in json.loads(line)
                          for line in open(log)):
                assert time.time() < deadline, "training did not go on while scoring"
                time.sleep(0.05)
        return timed(*args)

    def run(name):
        wd = str(tmp_path / name)
        training.train(cfg, wd, verbose=False)
        records = [json.loads(line) for line in open(tmp_path / name / "metrics.jsonl")]
        return records, checkpoints.restore_meta(wd, "best_val")

    monkeypatch.setattr(validation, "_timed_scores", after_epoch_3_is_logged)
    background, best_background = run("background")
    assert len(calls) == 3 and all(c.startswith("ddgjax-validation") for c in calls), calls
    monkeypatch.setattr(validation, "_scoring_pool", lambda: _InlinePool())
    inline, best_inline = run("inline")

    def validations(records):
        drop = ("sample_seconds", "score_seconds")
        return [(r["epoch"], {k: v for k, v in r["validation"].items() if k not in drop})
                for r in records if "validation" in r]

    assert [e for e, _ in validations(background)] == [2, 4, 6]
    assert validations(background) == validations(inline)
    assert best_background["epoch"] == best_inline["epoch"]
    assert best_background["validation_key"] == best_inline["validation_key"]
    order = [("val", r["epoch"]) if "validation" in r else ("loss", r["epoch"])
             for r in background if "validation" in r or "loss" in r]
    assert order.index(("val", 2)) > order.index(("loss", 3)), order


def test_resume_with_another_metric_or_an_unreadable_best_val_starts_the_choice_again(
        tmp_path, capsys):
    """best_val records the metric that chose it: a resume that validates by another metric
    does not compare keys of two metrics but replaces it at its next validation; an
    unreadable best_val is set aside with a warning instead of stopping the resume."""
    cfg = validated_config("mmd")
    wd = str(tmp_path / "run")
    training.train(cfg, wd, stop_after_epochs=2, verbose=False)
    first = checkpoints.restore_meta(wd, "best_val")
    assert first["validation_metric"] == "mmd" and first["epoch"] == 2
    cfg = validated_config("valid")
    cfg.train.num_epochs = 4
    training.train(cfg, wd, verbose=False)
    assert "chosen by validation.metric='mmd'" in capsys.readouterr().err
    meta = checkpoints.restore_meta(wd, "best_val")
    assert meta["validation_metric"] == "valid" and meta["epoch"] == 4
    # an unreadable best_val: moved aside, the run goes on
    step = checkpoints.latest_step(wd, "best_val")
    meta_file = tmp_path / "run" / "checkpoints" / "best_val" / str(step) / "meta" / "metadata"
    assert meta_file.is_file()
    meta_file.write_text("{not json")
    cfg.train.num_epochs = 6
    training.train(cfg, wd, verbose=False)
    assert "unreadable" in capsys.readouterr().err
    assert list((tmp_path / "run" / "checkpoints").glob("unreadable-best_val-*"))
    assert checkpoints.restore_meta(wd, "best_val")["epoch"] == 6


def test_validation_sampler_settings_fail_before_training(tmp_path):
    cfg = validated_config("valid")
    cfg.sample.num_steps = 1000   # the test config trains 8 levels
    with pytest.raises(ValueError, match="config.validation .*num_steps"):
        training.train(cfg, str(tmp_path / "run"), verbose=False)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
