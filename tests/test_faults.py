"""Faults lose nothing and say one line: the command lines run in-process (``main(argv)``
returns the exit status), on copies of one tiny trained run.

Each test checks the one ``error:`` line (or warning), the exit status, and that what
was saved before (checkpoints, config.json, samples) is still there. The one real
signal test (SIGINT to a training process) is ``test_cli.py::trained_workdir``.
"""
import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from configs import test as test_config
from ddgjax import checkpoints, training
from ddgjax.cli import sample as sample_cli
from ddgjax.cli import train as train_cli

from helpers import REPO
from helpers import keep_signal_handlers  # noqa: F401 - an autouse fixture
from helpers import the_error_line as error_line
from helpers import tree_digest as digest


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A 4-epoch run of configs/test.py (checkpoints at epochs 2 and 4)."""
    wd = tmp_path_factory.mktemp("faults") / "run"
    training.train(test_config.get_config(), str(wd), verbose=False)
    return wd


@pytest.fixture
def run_copy(trained, tmp_path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(trained, dest)
    return dest


def train_args(wd, *extra):
    return ["ddgjax-train", "--config", str(REPO / "configs" / "test.py"), f"--workdir={wd}",
            "--quiet", *extra]


# ----------------------------------------------------------------------------
# sampling output


def test_resampling_replaces_the_whole_sample_directory(run_copy, capsys):
    out = run_copy / "samples"
    assert sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}", "--num_samples=6",
                            "--graphml", "--chain_png=2", "--protocol=none", "--quiet"]) == 0
    assert len(list((out / "graphml").iterdir())) == 6 and (out / "chain.png").exists()
    assert sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}", "--num_samples=3",
                            "--graphml", "--protocol=none", "--quiet"]) == 0
    assert len(json.loads((out / "samples.json").read_text())["graphs"]) == 3
    assert sorted(p.name for p in (out / "graphml").iterdir()) == [
        f"sample_{i:05d}.graphml" for i in range(3)]
    assert not (out / "chain.png").exists()          # nothing of the first run survives
    assert sorted(p.name for p in run_copy.iterdir() if p.name.startswith(".")) == []
    capsys.readouterr()


def test_sampling_refuses_a_directory_with_other_files(run_copy, capsys, monkeypatch):
    out = run_copy / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    monkeypatch.setattr("ddgjax.sampling.load_run", lambda *a, **k: pytest.fail("model loaded"))
    code = sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}", f"--out={out}"])
    assert code == 1
    assert "notes.txt" in error_line(capsys)
    assert (out / "notes.txt").read_text() == "keep me"


def test_unwritable_output_directory_fails_before_the_model_loads(run_copy, capsys, monkeypatch):
    (run_copy / "a_file").write_text("")
    monkeypatch.setattr("ddgjax.sampling.load_run", lambda *a, **k: pytest.fail("model loaded"))
    code = sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}",
                            f"--out={run_copy / 'a_file' / 'out'}"])
    assert code == 1
    assert "cannot write" in error_line(capsys)


@pytest.mark.parametrize("flag", ["--batch_size=-2", "--num_samples=-1", "--num_steps=-3",
                                  "--chain_png=-1"])
def test_negative_sizes_are_one_line_errors(run_copy, capsys, flag):
    code = sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}", flag])
    assert code == 2
    assert flag.split("=")[0] in error_line(capsys)


def test_non_positive_config_sizes_are_errors(run_copy):
    from ddgjax.sampling import SamplingError, generate, load_run

    run = load_run(str(run_copy))
    with pytest.raises(SamplingError, match="batch_size"):
        generate(run, 4, batch_size=0)


# ----------------------------------------------------------------------------
# training: resume checks, restart, bad inputs


def test_resume_refuses_another_dataset_and_restart_sets_the_old_run_aside(run_copy, capsys):
    before = digest(run_copy)
    code = train_cli.main(train_args(run_copy, "--config.data.source=builtin:sbm_27"))
    assert code == 1
    line = error_line(capsys)
    assert "data.source ('builtin:community_small' -> 'builtin:sbm_27')" in line
    assert "--restart" in line
    assert digest(run_copy) == before                 # nothing written, nothing lost
    code = train_cli.main(train_args(run_copy, "--config.data.source=builtin:sbm_27",
                                     "--restart", "--stop_after_epochs=1"))
    assert code == 0
    err = capsys.readouterr().err
    assert "restart: moved the previous run" in err
    (aside,) = run_copy.glob("replaced-*")
    assert digest(aside) == {k: v for k, v in before.items()}   # the old run, whole
    assert json.loads((run_copy / "config.json").read_text())["data"]["source"] == \
        "builtin:sbm_27"


def test_resume_refuses_another_model(run_copy, capsys):
    before = digest(run_copy)
    assert train_cli.main(train_args(run_copy, "--config.model.name=edp")) == 1
    assert "model.name ('ppgn' -> 'edp')" in error_line(capsys)
    assert digest(run_copy) == before


def test_resume_may_change_remat_and_compute_dtype():
    """Rematerialisation, the compute dtype and the PPGN's internal padding change how a
    step runs, not the run: resuming with them changed (or the padding set where an older
    run's config lacks it) is not refused; the model's width still is."""
    from ddgjax.workdir import run_differences
    old = {"model": {"name": "ppgn", "compute_dtype": "float32",
                     "ppgn": {"hidden": 8, "remat": False}}}
    new = {"model": {"name": "ppgn", "compute_dtype": "bfloat16",
                     "ppgn": {"hidden": 8, "remat": True, "pad_multiple": 32}}}
    assert run_differences(old, {}, new, {}) == []
    old["model"]["ppgn"]["pad_multiple"] = 1
    assert run_differences(old, {}, new, {}) == []
    new["model"]["ppgn"]["hidden"] = 16
    assert run_differences(old, {}, new, {}) == ["model.ppgn.hidden (8 -> 16)"]


def test_an_old_record_resumes_in_todays_keys_and_a_removed_lever_is_refused(run_copy,
                                                                             capsys):
    """A config.json written by an earlier version (``workdir.read_run_record`` reads it
    through ``configuration.complete_run_config``): keys of removed levers at their off
    value and dropped settings go, and the run is the same run; one that used a removed
    lever is refused in one line naming the key, and nothing is written."""
    from ddgjax.workdir import check_same_run, read_run_record

    path = run_copy / "config.json"
    record = json.loads(path.read_text())
    record["train"].update(weight_decay=0.0, b1=0.9, flat_update=False)
    path.write_text(json.dumps(record))
    config, dataset = read_run_record(str(run_copy))
    assert "weight_decay" not in config.train and "flat_update" not in config.train
    check_same_run(str(run_copy), test_config.get_config(), dataset)
    record["train"]["weight_decay"] = 0.1
    path.write_text(json.dumps(record))
    before = digest(run_copy)
    assert train_cli.main(train_args(run_copy)) == 1
    assert "train.weight_decay" in error_line(capsys)
    assert digest(run_copy) == before


def test_resume_ignores_what_the_run_does_not_use():
    """The section of the model the run does not use, the Gaussian sampler's eta, the
    kernels and data.allow_pickle may change on a resume; the run's own model section may
    not."""
    from ddgjax.workdir import run_differences
    old = {"model": {"name": "ppgn", "ppgn": {"hidden": 8, "kernels": "xla"},
                     "edp": {"hidden": 8}},
           "diffusion": {"kind": "gaussian", "gaussian": {"eta": 1.0}},
           "data": {"allow_pickle": False}}
    new = {"model": {"name": "ppgn", "ppgn": {"hidden": 8, "kernels": "pallas"},
                     "edp": {"hidden": 4}},
           "diffusion": {"kind": "gaussian", "gaussian": {"eta": 0.0}},
           "data": {"allow_pickle": True}}
    assert run_differences(old, {}, new, {}) == []
    new["model"]["ppgn"]["hidden"] = 16
    old["diffusion"]["num_timesteps"], new["diffusion"]["num_timesteps"] = 32, 64
    assert run_differences(old, {}, new, {}) == [
        "diffusion.num_timesteps (32 -> 64)", "model.ppgn.hidden (8 -> 16)"]
    new["model"]["name"] = "edp"   # another model: its own section now counts
    assert "model.name ('ppgn' -> 'edp')" in run_differences(old, {}, new, {})


def test_resume_refuses_another_training_seed():
    """The seed fixes the initial parameters and every batch and noise draw: a resume with
    another one would splice two trajectories, so it is refused by name."""
    from ddgjax.workdir import run_differences
    old = {"train": {"batch_size": 4, "seed": 0}}
    assert run_differences(old, {}, {"train": {"batch_size": 4, "seed": 0}}, {}) == []
    assert run_differences(old, {}, {"train": {"batch_size": 4, "seed": 7}}, {}) == [
        "train.seed (0 -> 7)"]


def test_missing_config_file_is_one_line(tmp_path, capsys):
    code = train_cli.main(["ddgjax-train", "--config", str(tmp_path / "nope.py"),
                           f"--workdir={tmp_path / 'w'}"])
    assert code == 2
    assert "nope.py not found" in error_line(capsys)
    assert not (tmp_path / "w").exists()


def test_unknown_config_name_lists_the_bundled_ones(tmp_path, capsys):
    assert train_cli.main(["ddgjax-train", "--config", "ego_small_ppgn", "--workdir",
                           str(tmp_path)]) == 2
    assert "spectre_planar_64" in error_line(capsys)


def test_unwritable_workdir_is_one_line(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    code = train_cli.main(train_args(tmp_path / "a_file" / "wd"))
    assert code == 1
    assert "cannot write to this workdir" in error_line(capsys)


def test_negative_train_flag_and_help(tmp_path, capsys):
    assert train_cli.main(train_args(tmp_path, "--stop_after_epochs=-1")) == 2
    error_line(capsys)
    assert train_cli.main(["ddgjax-train", "--help"]) == 0
    assert "--workdir" in capsys.readouterr().out
    assert sample_cli.main(["ddgjax-sample", "--help"]) == 0
    assert "--num_samples" in capsys.readouterr().out
    from ddgjax.evaluate import main as evaluate_main

    assert evaluate_main(["--help"]) == 0


# ----------------------------------------------------------------------------
# unreadable checkpoints


def corrupt_data(wd: Path, kind: str) -> Path:
    """Truncate every array data file of checkpoint ``kind``; returns its directory."""
    (step_dir,) = [p for p in (wd / "checkpoints" / kind).iterdir() if p.name.isdigit()]
    for f in (step_dir / "state").rglob("d/*"):
        f.write_bytes(f.read_bytes()[:50])
    return step_dir


def test_unreadable_latest_falls_back_to_best_and_is_kept(run_copy, capsys):
    bad = corrupt_data(run_copy, "latest")
    best_epoch = checkpoints.restore_meta(str(run_copy), "best")["epoch"]
    bad_files = digest(bad)
    assert train_cli.main(train_args(run_copy, "--config.train.num_epochs=5")) == 0
    err = capsys.readouterr().err
    warnings = [l for l in err.splitlines() if l.startswith("warning:")]
    assert len(warnings) == 1 and str(bad) in warnings[0], err
    assert f"resuming from the 'best' checkpoint (epoch {best_epoch})" in warnings[0]
    (moved,) = (run_copy / "checkpoints").glob("unreadable-latest-*")
    assert digest(moved) == bad_files                 # set aside, not deleted
    assert checkpoints.restore_meta(str(run_copy), "latest")["epoch"] == 5
    epochs = [r["epoch"] for r in map(json.loads, (run_copy / "metrics.jsonl").read_text()
                                      .splitlines()) if "epoch" in r]
    assert epochs == sorted(set(epochs))              # no epoch logged twice


def test_sampling_an_unreadable_checkpoint_names_it_and_lists_the_others(run_copy, capsys):
    bad = corrupt_data(run_copy, "best")
    code = sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}", "--checkpoint=best"])
    assert code == 1
    line = error_line(capsys)
    assert f"{bad}: unreadable checkpoint" in line and "latest (step" in line


def test_truncated_metadata_names_the_checkpoint(run_copy, capsys):
    (step_dir,) = [p for p in (run_copy / "checkpoints" / "latest").iterdir()
                   if p.name.isdigit()]
    meta = step_dir / "state" / "_METADATA"
    meta.write_bytes(meta.read_bytes()[:40])
    code = sample_cli.main(["ddgjax-sample", f"--workdir={run_copy}", "--checkpoint=latest"])
    assert code == 1
    assert f"{step_dir}: unreadable checkpoint" in error_line(capsys)


def test_no_readable_checkpoint_is_an_error_that_keeps_them(run_copy, capsys):
    corrupt_data(run_copy, "latest")
    corrupt_data(run_copy, "best")
    before = digest(run_copy)
    assert train_cli.main(train_args(run_copy)) == 1
    assert "no readable checkpoint" in error_line(capsys)
    assert digest(run_copy) == before


# ----------------------------------------------------------------------------
# signals


def test_a_signal_during_a_save_waits_for_the_save(tmp_path, monkeypatch):
    """SIGINT arriving in the middle of a checkpoint save: the save completes, then the
    KeyboardInterrupt comes."""
    import orbax.checkpoint as ocp

    from test_checkpoints import state_of

    real_save = ocp.CheckpointManager.save

    def save_with_interrupt(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)           # handled only after the block
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(ocp.CheckpointManager, "save", save_with_interrupt)
    _, _, state = state_of(hidden=8)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save(str(tmp_path), "latest", 3, state, {"epoch": 1})
    assert checkpoints.latest_step(str(tmp_path), "latest") == 3
    assert checkpoints.restore_meta(str(tmp_path), "latest") == {"epoch": 1}
    assert not list((tmp_path / "checkpoints" / "latest").glob("*tmp*"))


def test_interrupted_training_says_where_to_resume(run_copy, monkeypatch):
    """KeyboardInterrupt inside the loop becomes TrainingInterrupted with the epoch reached
    and the checkpoint a resume starts from."""
    calls = {"n": 0}
    real_save = checkpoints.CheckpointWriter.save

    def save_then_interrupt(self, *args, **kwargs):
        real_save(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:                         # after the epoch-6 'latest' save
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints.CheckpointWriter, "save", save_then_interrupt)
    cfg = test_config.get_config()
    cfg.train.num_epochs = 10
    with pytest.raises(training.TrainingInterrupted, match=r"^interrupted at epoch \d+; resume "
                                                           r"with the same command") as err:
        training.train(cfg, str(run_copy), verbose=False)
    # the epoch it names as the resume point is the newest checkpoint's
    saved = checkpoints.restore_meta(str(run_copy), "latest")["epoch"]
    assert saved == 6
    message = str(err.value)
    assert message.endswith(f"checkpoint of epoch {saved})") or (
        message == f"interrupted at epoch {saved}; resume with the same command"), message


def test_a_signal_while_a_write_is_in_flight_waits_for_it(run_copy, monkeypatch, capsys):
    """Ctrl-C while a checkpoint is written in the background (here: SIGINT sent by the
    write itself, which then takes a while to finish): the run finishes the write before
    it stops, and the message names the checkpoint on disk that a resume starts from."""
    import time

    from orbax.checkpoint._src.checkpointers import async_checkpointer

    real_commit = async_checkpointer._on_commit_callback
    sent = []

    def slow_commit(*args, **kwargs):  # Orbax's background thread, before the final rename
        if not sent:                   # the first write of this run: epoch 6
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)            # the main thread acts on the signal meanwhile
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(async_checkpointer, "_on_commit_callback", slow_commit)
    cfg = test_config.get_config()
    cfg.train.num_epochs = 10
    with pytest.raises(training.TrainingInterrupted) as info:
        training.train(cfg, str(run_copy), verbose=False)
    m = re.fullmatch(r"interrupted at epoch (\d+); resume with the same command"
                     r"(?: \(it continues from the checkpoint of epoch (\d+)\))?", str(info.value))
    assert m and sent, info.value
    resume = int(m.group(2) or m.group(1))
    assert resume >= 6 and checkpoints.restore_meta(str(run_copy), "latest")["epoch"] == resume
    for kind in ("best", "latest"):
        assert not list((run_copy / "checkpoints" / kind).glob("*tmp*"))
    assert "warning" not in capsys.readouterr().err
