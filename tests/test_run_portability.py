"""A run is portable and every fault is one line: a run trained on a data file samples
after the file moved, completion and sampling keep their own directories, one split rule
for files without a ``split`` field, and the small words of the command lines.

In-process ``main(argv)`` calls on one tiny run trained from a JSON file; the one
behaviour that is the process's (what a fresh process prints for a damaged checkpoint)
runs as a subprocess.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from configs import test as test_config
from ddgjax import evaluate, training
from ddgjax.cli import sample as sample_cli
from ddgjax.cli import train as train_cli
from ddgjax.data import load_dataset, write_graph_list

from helpers import REPO, random_graphs
from helpers import keep_signal_handlers  # noqa: F401 - an autouse fixture
from helpers import the_error_line as error_line
from helpers import tree_digest as digest

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def config_on(source: str, epochs: int = 2):
    cfg = test_config.get_config()
    cfg.data.source = source
    cfg.train.num_epochs = epochs
    cfg.train.checkpoint_every_epochs = epochs
    cfg.sample.num_samples = 4
    return cfg


@pytest.fixture(scope="module")
def moved_run(tmp_path_factory):
    """A run trained from ``./data/my.json`` (a relative path, 15 graphs, no split field)
    whose data file then moved to ``elsewhere/my.json``. Returns ``(root, workdir, new
    data path)``."""
    root = tmp_path_factory.mktemp("portable")
    (root / "data").mkdir()
    write_graph_list(root / "data" / "my.json", random_graphs(15, seed=3))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        training.train(config_on("data/my.json"), "run", verbose=False)
    finally:
        os.chdir(cwd)
    (root / "elsewhere").mkdir()
    shutil.move(root / "data" / "my.json", root / "elsewhere" / "my.json")
    return root, root / "run", root / "elsewhere" / "my.json"


def test_a_run_samples_from_anywhere_after_its_data_moved(moved_run, tmp_path, monkeypatch,
                                                          capsys):
    root, wd, new_data = moved_run
    record = json.loads((wd / "dataset.json").read_text())
    assert record["path"] == str(root / "data" / "my.json") and record["data_digest"]
    monkeypatch.chdir(tmp_path)                          # another directory
    out = tmp_path / "s"
    # no evaluation asked: no data read
    assert sample_cli.main(["s", f"--workdir={wd}", f"--out={out}", "--protocol=none",
                            "--quiet"]) == 0
    assert sorted(os.listdir(out)) == ["grid.png", "samples.json"]
    # evaluation asked: one line naming the record, the old path and the way out
    assert sample_cli.main(["s", f"--workdir={wd}", f"--out={out}", "--quiet"]) == 1
    line = error_line(capsys)
    assert "dataset.json" in line and "data/my.json" in line and "--reference" in line
    assert sorted(os.listdir(out)) == ["grid.png", "samples.json"]  # kept as it was
    # --reference: scored against the test split of the file where it is now, the same
    # graphs training held out (the first 20 %: 3 of 15)
    assert sample_cli.main(["s", f"--workdir={wd}", f"--out={out}", "--quiet",
                            f"--reference={new_data}:test"]) == 0
    ev = json.loads((out / "eval.json").read_text())
    assert ev["num_reference"] == len(load_dataset(str(new_data)).test) == 3


def test_resume_follows_the_data_by_content_not_by_path(moved_run, tmp_path, capsys):
    root, wd, new_data = moved_run
    run = tmp_path / "run"
    shutil.copytree(wd, run)
    args = ["t", "--config", str(REPO / "configs" / "test.py"), f"--workdir={run}",
            "--quiet", "--config.train.checkpoint_every_epochs=2"]
    assert train_cli.main(args + [f"--config.data.source={new_data}",
                                  "--config.train.num_epochs=4"]) == 0
    assert "resuming" in capsys.readouterr().err
    # other graphs at a path: refused, naming the source and the content
    other = tmp_path / "other.json"
    write_graph_list(other, random_graphs(15, seed=4))
    before = digest(run)
    assert train_cli.main(args + [f"--config.data.source={other}",
                                  "--config.train.num_epochs=6"]) == 1
    line = error_line(capsys)
    assert "data.source" in line and "content differs" in line
    assert digest(run) == before


def test_completion_keeps_samples_and_kinds_are_not_mixed(moved_run, tmp_path, capsys):
    root, wd, new_data = moved_run
    run = tmp_path / "run"
    shutil.copytree(wd, run)
    assert sample_cli.main(["s", f"--workdir={run}", "--protocol=none", "--quiet"]) == 0
    samples = digest(run / "samples")
    complete = ["s", f"--workdir={run}", f"--complete={new_data}:test", "--hide=0.3",
                "--num_samples=2", "--quiet"]
    assert sample_cli.main(complete) == 0
    assert digest(run / "samples") == samples                       # untouched
    made = json.loads((run / "completions" / "samples.json").read_text())
    assert made["generated_by"]["task"] == "completion" and len(made["graphs"]) == 3 * 2
    # completions into the samples' directory: refused without --overwrite
    assert sample_cli.main(complete + [f"--out={run / 'samples'}"]) == 1
    assert "--overwrite" in error_line(capsys)
    assert digest(run / "samples") == samples
    assert sample_cli.main(complete + [f"--out={run / 'samples'}", "--overwrite"]) == 0
    # --out . would replace the directory the shell stands in
    os.chdir(run / "samples")
    try:
        assert sample_cli.main(["s", f"--workdir={run}", "--out=.", "--quiet"]) == 1
    finally:
        os.chdir(REPO)
    assert "current directory" in error_line(capsys)


def test_evaluate_takes_the_test_split_of_a_file_without_splits(moved_run, capsys):
    root, wd, new_data = moved_run
    code = evaluate.main(["--reference", f"{new_data}:test", "--generated",
                          f"{new_data}:train"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_reference"] == 3 and out["train"] == f"{new_data}:train"


def test_nll_with_one_draw_writes_json_without_nan(moved_run, capsys):
    root, wd, new_data = moved_run
    code = evaluate.main(["--nll", f"--workdir={wd}", "--reference", f"{new_data}:test",
                          "--num_draws", "1", "--num_levels", "2"])
    assert code == 0
    text = capsys.readouterr().out
    out = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in {text}"))
    assert out["se_bits_per_pair"] is None and out["bits_per_pair"] > 0


def test_samples_record_the_kernels_that_ran(moved_run, tmp_path):
    root, wd, new_data = moved_run
    out = tmp_path / "s"
    assert sample_cli.main(["s", f"--workdir={wd}", f"--out={out}", "--protocol=none",
                            "--quiet", "--kernels=pallas", "--compute_dtype=bfloat16"]) == 0
    made = json.loads((out / "samples.json").read_text())["generated_by"]
    assert made["model_settings"]["kernels"] == "xla"              # a CPU runs XLA's block


def test_small_words(tmp_path, capsys):
    args = ["s", f"--workdir={tmp_path}"]
    assert sample_cli.main(args + ["--num_sample=3"]) == 2
    assert error_line(capsys) == "error: unknown flag --num_sample; did you mean --num_samples?"
    assert sample_cli.main(args + ["--seed=-5"]) == 2
    assert "--seed" in error_line(capsys)
    # an installed user has ddgjax-train, not train.py
    assert sample_cli.main(args + ["--quiet"]) == 1
    line = error_line(capsys)
    assert "ddgjax-train" in line and "train.py" not in line


def test_a_failed_first_start_leaves_no_workdir_and_names_the_graph_in_the_file(tmp_path,
                                                                               capsys):
    graphs = random_graphs(10, seed=5)
    graphs[7].add_nodes_from(range(100, 140))         # graph 7 of the file: train split
    data = tmp_path / "big.json"
    write_graph_list(data, graphs)
    wd = tmp_path / "new" / "run"
    assert train_cli.main(["t", "--config", str(REPO / "configs" / "test.py"),
                           f"--workdir={wd}", f"--config.data.source={data}",
                           "--config.data.max_nodes=30", "--quiet"]) == 1
    line = error_line(capsys)
    assert "graph 7 " in line and "config.data.max_nodes = 30" in line
    assert not (tmp_path / "new").exists()


def test_a_killed_save_is_cleaned_up_with_one_line(moved_run, tmp_path, capsys):
    root, wd, new_data = moved_run
    run = tmp_path / "run"
    shutil.copytree(wd, run)
    (step,) = [p for p in (run / "checkpoints" / "latest").iterdir()]
    unfinished = step.parent / f"{int(step.name) + 5}.orbax-checkpoint-tmp-1700000000"
    shutil.copytree(step, unfinished)
    assert train_cli.main(["t", "--config", str(REPO / "configs" / "test.py"),
                           f"--workdir={run}", f"--config.data.source={new_data}",
                           "--config.train.num_epochs=4", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("unfinished checkpoint save") == 1 and str(unfinished) in err
    assert not unfinished.exists()


def test_sampling_a_truncated_latest_prints_one_line(moved_run, tmp_path):
    """A fresh process: exactly one line on stderr (no Orbax log, no asyncio echo)."""
    root, wd, new_data = moved_run
    run = tmp_path / "run"
    shutil.copytree(wd, run)
    for f in (run / "checkpoints" / "latest").rglob("*"):
        if f.is_file():
            f.write_bytes(f.read_bytes()[:20])
    res = subprocess.run([sys.executable, "sample.py", f"--workdir={run}", "--protocol=none",
                          "--checkpoint=latest", "--quiet"], cwd=REPO, env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "latest" in lines[0], \
        res.stderr
