"""The command lines end to end, in subprocesses: configs, a tiny run, bad inputs."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import re
from absl import flags
from ml_collections import config_flags

from configs import paper
from configs import test as test_config
from ddgjax import checkpoints, cli, training

from helpers import REPO

ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}
# one device per process (no fake devices), but conftest's compile-time flags
ENV["XLA_FLAGS"] = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                            if "xla_force_host_platform_device_count" not in f)


def run(*args, timeout=300):
    return subprocess.run([sys.executable, *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def parse_config(*overrides, path="configs/test.py"):
    argv = ["prog", f"--config={REPO / path}", *overrides]
    fv = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, lock_config=True,
                                    sys_argv=argv)
    fv(argv)
    return fv.config


def test_config_loading_and_overrides():
    cfg = parse_config("--config.train.lr=0.01", "--config.model.name=edp",
                       "--config.diffusion.loss=vb")
    assert cfg.train.lr == 0.01 and cfg.model.name == "edp" and cfg.diffusion.loss == "vb"
    assert cfg.diffusion.num_timesteps == 8  # from test.py, over default.py


def test_unknown_config_key_is_an_error():
    with pytest.raises(Exception, match="lrr"):
        parse_config("--config.train.lrr=0.01")


@pytest.mark.parametrize("spec", paper.all_specs())
def test_every_paper_config_loads(spec):
    cfg = parse_config(path=f"configs/paper.py:{spec}")
    assert cfg.model.name in ("ppgn", "edp")
    assert cfg.train.batch_size == 64 and cfg.train.lr == 1e-3


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        h.update(str(p.relative_to(path)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def one_line_error(res):
    assert res.returncode != 0, res.stdout + res.stderr
    lines = [l for l in res.stderr.strip().splitlines() if l.startswith("error:")]
    assert len(lines) == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    return lines[0]


@pytest.fixture(scope="module")
def trained_workdir(tmp_path_factory):
    """train (interrupted by Ctrl-C mid-run) -> resume -> done; shared by the tests below.
    Both commands keep their programs in their own $DDGJAX_COMPILE_CACHE (JAX's persistent
    cache; not the session's), which test_train_cli_keeps_its_compiled_programs checks."""
    wd = tmp_path_factory.mktemp("run") / "wd"
    cache = tmp_path_factory.mktemp("compile_cache")
    env = {k: v for k, v in ENV.items()   # conftest sets both for the test process
           if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")}
    env["DDGJAX_COMPILE_CACHE"] = str(cache)
    common = ["train.py", "--config=configs/test.py", f"--workdir={wd}", "--quiet",
              "--config.train.checkpoint_every_epochs=1"]
    # A real Ctrl-C: start a long run, SIGINT it once a checkpoint exists.
    proc = subprocess.Popen([sys.executable, *common, "--config.train.num_epochs=1000"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    latest = wd / "checkpoints" / "latest"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if latest.is_dir() and any(p.name.isdigit() for p in latest.iterdir()):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    # one line, no traceback, the epoch reached and how to resume
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err[-2000:]
    m = re.fullmatch(r"interrupted at epoch (\d+); resume with the same command.*", err.strip())
    assert m, err
    assert latest.is_dir() and not list(latest.glob("*tmp*"))
    total = int(m.group(1)) + 2   # a few epochs more than the interrupted run reached
    res = subprocess.run([sys.executable, *common, f"--config.train.num_epochs={total}"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming from" in res.stderr and f"trained {total} epochs" in res.stdout
    meta = json.loads((wd / "config.json").read_text())
    assert meta["train"]["num_epochs"] == total
    return wd, total, cache


def test_train_resume_sample_end_to_end(trained_workdir):
    wd, total, _ = trained_workdir
    meta = json.loads((wd / "config.json").read_text())
    records = [json.loads(l) for l in (wd / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["event"] == "end" and records[-1]["epochs"] == total
    assert [r["epoch"] for r in records if "epoch" in r] == list(range(1, total + 1))
    assert (wd / "checkpoints" / "best").is_dir()
    res = run("sample.py", f"--workdir={wd}", "--num_samples=10", "--batch_size=4", "--graphml",
              "--chain_png=2", "--quiet", "--pad_multiple=8")
    assert res.returncode == 0, res.stderr[-3000:]
    out = wd / "samples"
    data = json.loads((out / "samples.json").read_text())
    assert len(data["graphs"]) == 10
    # how the model computed, with the --pad_multiple override (trained unpadded), and
    # which checkpoint (the config's: best)
    assert meta["model"]["ppgn"].get("pad_multiple", 1) == 1
    assert data["generated_by"]["model_settings"] == {
        "compute_dtype": meta["model"]["compute_dtype"], "kernels": "xla", "pad_multiple": 8}
    assert data["generated_by"]["checkpoint"] == "best"
    assert (out / "grid.png").stat().st_size > 1000
    assert (out / "chain.png").stat().st_size > 1000
    assert len(list((out / "graphml").glob("*.graphml"))) == 10
    assert "graphs/s" in res.stdout
    ev = json.loads((out / "eval.json").read_text())
    assert {"degree", "clustering", "orbit"} <= set(ev)


def test_bad_inputs_fail_cleanly_and_keep_checkpoints(trained_workdir, tmp_path):
    wd, _, _ = trained_workdir
    before = tree_digest(wd / "checkpoints")
    cfg_before = (wd / "config.json").read_text()
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"graphs": [{"n": 3, "edges": [[0, 1]]}, ')
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"graphs": [{"n": 4, "edges": [[0, 1]]}] * 4 +
                                         [{"n": 30, "edges": [[0, 29]]}] * 6}))
    base = ["train.py", "--config=configs/test.py", f"--workdir={wd}", "--quiet"]
    # One subprocess per kind of failure (data file, flag parsing, workdir/checkpoint,
    # sampling); the other bad inputs are checked in-process below, against the
    # same exception types the command lines turn into one line.
    cases = {
        "malformed JSON": (base + [f"--config.data.source={bad_json}"], "malformed JSON"),
        "unknown config key": (base + ["--config.train.lrr=1"], "unknown config key"),
        "another model in this workdir": (base + ["--config.model.ppgn.hidden=12"],
                                          "model.ppgn.hidden (8 -> 12)"),
    }
    for name, (args, expected) in cases.items():
        line = one_line_error(run(*args))
        assert expected in line, (name, line)
    empty = tmp_path / "empty_workdir"
    empty.mkdir()
    line = one_line_error(run("sample.py", f"--workdir={empty}"))
    assert "no trained run" in line
    line = one_line_error(run("sample.py", f"--workdir={wd}", "--renoise_mix=0.5",
                              f"--out={tmp_path / 'never'}"))
    assert "renoise_mix: acts only in Algorithm 1 steps" in line
    in_process = {
        "missing file": ({"data.source": "/nonexistent/graphs.json"}, "not found"),
        "graph above max nodes": ({"data.source": str(big), "data.max_nodes": 20},
                                  "more than config.data.max_nodes = 20"),
        "bad config value": ({"train.lr": -1.0}, "config.train.lr: expected a positive number"),
        "bad process option": ({"diffusion.loss": "l2"}, "config.diffusion.loss"),
        "bad model name": ({"model.name": "gcn"}, "config.model.name"),
    }
    for name, (overrides, expected) in in_process.items():
        cfg = test_config.get_config()
        for key, value in overrides.items():
            section, field = key.split(".")
            cfg[section][field] = value
        with pytest.raises(cli.user_errors(), match=re.escape(expected)):
            training.train(cfg, str(wd), verbose=False)
    assert tree_digest(wd / "checkpoints") == before
    assert (wd / "config.json").read_text() == cfg_before


def test_train_cli_keeps_its_compiled_programs(trained_workdir, tmp_path, monkeypatch, capsys):
    """ddgjax-train fills $DDGJAX_COMPILE_CACHE (JAX's persistent cache), so the next run of
    the model loads its programs (the commands of ``trained_workdir`` ran with that
    variable alone); an unusable cache directory only warns (checked in process: the cache
    is left off, JAX's settings untouched)."""
    _, _, cache = trained_workdir
    # every program, however quick to compile (JAX's default keeps only those of >= 1 s:
    # one here), so a rerun also skips the op-by-op init's ~90 small compiles
    assert len(list(cache.iterdir())) >= 20
    blocker = tmp_path / "file"
    blocker.write_text("")
    import jax

    before = jax.config.jax_compilation_cache_dir
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("DDGJAX_COMPILE_CACHE", str(blocker / "sub"))
    assert cli.enable_compile_cache() is None
    assert "warning: compile cache" in capsys.readouterr().err
    assert jax.config.jax_compilation_cache_dir == before


def test_sample_flags_default_to_the_runs_config():
    """Without flags every setting is the run's (None); a flag overrides one: the model's
    (``load_run``'s keyword arguments) and the sampler's (``--pad_multiple 0``, the
    default: as trained; ``--algorithm 0``: the config's)."""
    from absl import flags

    from ddgjax.cli import sample as sample_cli

    fv = flags.FlagValues()
    sample_cli.define_flags(fv)
    fv(["sample.py", "--workdir=W"])
    assert sample_cli.model_options(fv) == dict(checkpoint=None, use_ema=None,
                                                compute_dtype=None, kernels=None,
                                                pad_multiple=None)
    assert sample_cli.sampler_options(fv) == {}
    fv(["sample.py", "--workdir=W", "--pad_multiple=32", "--compute_dtype=bfloat16",
        "--noema", "--kernels=pallas", "--checkpoint=latest", "--algorithm=1",
        "--grid=power:3", "--renoise_mix=0.5", "--logit_scale=0.9"])
    assert sample_cli.model_options(fv) == dict(checkpoint="latest", use_ema=False,
                                                compute_dtype="bfloat16", kernels="pallas",
                                                pad_multiple=32)
    assert sample_cli.sampler_options(fv) == dict(algorithm=1, grid="power:3",
                                                  renoise_mix=0.5, logit_scale=0.9)
    for bad in ("--pad_multiple=-1", "--algorithm=3", "--kernels=triton"):
        with pytest.raises(flags.IllegalFlagValueError):
            fv(["sample.py", "--workdir=W", bad])


def test_sampling_with_the_workdir_alone_is_the_configs_recipe(tmp_path, capsys):
    """``ddgjax-sample --workdir W`` samples with the run's config.sample settings (the
    checkpoint, steps, algorithm and levers its recipe names), recorded in samples.json;
    flags override them one by one."""
    import shutil

    from ddgjax.cli import sample as sample_cli

    wd = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "run_v0_1", wd)
    config = json.loads((wd / "config.json").read_text())
    config["sample"].update(algorithm=1, num_steps=4, renoise_mix=0.5, logit_scale=0.9,
                            num_samples=3, checkpoint="best")
    (wd / "config.json").write_text(json.dumps(config))
    common = ["ddgjax-sample", f"--workdir={wd}", "--protocol=none", "--quiet"]
    assert sample_cli.main(common) == 0
    assert "(4 steps, algorithm 1, checkpoint best)" in capsys.readouterr().out
    meta = json.loads((wd / "samples" / "samples.json").read_text())["generated_by"]
    assert meta["sampler"] == {"process": "discrete", "num_steps": 4, "algorithm": 1,
                               "grid": "trained", "renoise_mix": 0.5, "logit_scale": 0.9}
    assert (meta["checkpoint"], meta["num_samples"]) == ("best", 3)
    assert sample_cli.main(common + ["--algorithm=2", "--renoise_mix=0", "--num_steps=2",
                                     "--logit_scale=1.5"]) == 0
    meta = json.loads((wd / "samples" / "samples.json").read_text())["generated_by"]
    assert meta["sampler"] == {"process": "discrete", "num_steps": 2, "algorithm": 2,
                               "grid": "trained", "renoise_mix": 0.0, "logit_scale": 1.5}


def test_train_cli_on_two_hosts(tmp_path):
    """Two processes joined by jax.distributed (CPU, gloo) train one run together, and
    it equals the same run trained by one process on one device; --restart and an
    unreadable ``latest`` on two hosts (two launches of both processes: the run compared
    with one process's is the one --restart starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    wd = tmp_path / "mh"
    def two_hosts(*args):
        """Both processes' ``(out, err)`` of train.py on ``wd`` with ``args``; each must
        exit 0."""
        procs = [subprocess.Popen([sys.executable, "train.py", "--config=configs/test.py",
                                   f"--workdir={wd}", f"--coordinator=127.0.0.1:{port}",
                                   "--num_processes=2", f"--process_id={i}", *args],
                                  cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for i in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (_, err) in zip(procs, outs):
            assert p.returncode == 0, err[-3000:]
        return outs

    # The run one process trains alone on one device (here, in process), to compare with;
    # a copy of it is the old run in the workdir that --restart sets aside.
    import shutil

    import jax

    cfg = test_config.get_config()
    cfg.train.num_epochs, cfg.train.checkpoint_every_epochs = 2, 1
    training.train(cfg, str(tmp_path / "one"), verbose=False, devices=jax.devices()[:1])
    shutil.copytree(tmp_path / "one", wd)
    # --restart on two hosts: process 0 moves the old run aside and no process restores
    # it (they wait for the move): both start again at epoch 0
    outs = two_hosts("--quiet", "--restart", "--config.train.num_epochs=2",
                     "--config.train.checkpoint_every_epochs=1")
    for out, err in outs:
        assert "trained 2 epochs" in out and "resuming" not in err
    assert len(list(wd.glob("replaced-*"))) == 1
    # both hosts report the same loss: one model, gradients summed across them
    assert outs[0][0].split("best training loss")[1] == outs[1][0].split("best training loss")[1]
    assert (wd / "checkpoints" / "latest").is_dir()
    # ... and it is the run one process trains alone: the same loss at every epoch.
    # (Parameters are not compared: Adam turns float noise in gradients that are zero
    # in exact arithmetic, e.g. of biases before an instance norm, into +-lr steps. The
    # fast test_training.py::test_four_devices_match_one_device compares them under SGD.)
    records = [[json.loads(r) for r in (d / "metrics.jsonl").read_text().splitlines()]
               for d in (wd, tmp_path / "one")]
    assert [r["epoch"] for r in records[0] if "loss" in r] == [1, 2]   # the new run's alone
    losses = [[r["loss"] for r in recs if "loss" in r] for recs in records]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    # an unreadable `latest` on two hosts: both resume from `best`, process 0 sets the
    # bad one aside once every process has read it, and the run goes on to its end
    best_epoch = checkpoints.restore_meta(str(wd), "best")["epoch"]
    (step_dir,) = [p for p in (wd / "checkpoints" / "latest").iterdir() if p.name.isdigit()]
    for f in (step_dir / "state").rglob("d/*"):
        f.write_bytes(f.read_bytes()[:50])
    outs = two_hosts("--config.train.num_epochs=3", "--config.train.checkpoint_every_epochs=1")
    assert all("trained" in out for out, _ in outs)
    assert f"resuming from the 'best' checkpoint (epoch {best_epoch})" in outs[0][1]
    assert len(list((wd / "checkpoints").glob("unreadable-latest-*"))) == 1
    assert checkpoints.restore_meta(str(wd), "latest")["epoch"] == 3


def test_train_cli_seeds_flag(tmp_path, monkeypatch, capsys):
    """--seeds trains the seeds in one program (training.train_seeds, stubbed here; the
    runs themselves: test_training.py::test_train_seeds_*); a bad list is a usage error."""
    from ddgjax.cli import train as train_cli

    calls = []

    def fake(config, workdir, seeds, **kwargs):
        calls.append((workdir, seeds, kwargs))
        run = {"best_loss": 0.25, "epochs": 3}
        return {"epochs": 3, "steps": 6, "seconds": 1.0, "runs": [run] * len(seeds)}

    monkeypatch.setattr(training, "train_seeds", fake)
    argv = ["ddgjax-train", f"--config={REPO / 'configs' / 'test.py'}", f"--workdir={tmp_path}",
            "--quiet"]
    assert train_cli.main(argv + ["--seeds=0,3,7", "--stop_after_epochs=2"]) == 0
    assert calls == [(str(tmp_path), [0, 3, 7],
                      {"stop_after_epochs": 2, "verbose": False, "restart": False})]
    assert "trained 3 seeds for 3 epochs" in capsys.readouterr().out
    assert train_cli.main(argv + ["--seeds=0,x"]) == 2
    assert "--seeds 0,x: expected integers" in capsys.readouterr().err


def test_compile_cache_dir_follows_the_environment():
    from ddgjax.cli import compile_cache_dir

    both = {"JAX_COMPILATION_CACHE_DIR": "/a", "DDGJAX_COMPILE_CACHE": "/b"}
    assert compile_cache_dir(both) == "/a"
    assert compile_cache_dir({"DDGJAX_COMPILE_CACHE": "/b"}) == "/b"
    for off in ("none", "OFF", "", "0"):
        assert compile_cache_dir({"DDGJAX_COMPILE_CACHE": off}) is None
    assert compile_cache_dir({"XDG_CACHE_HOME": "/c"}) == "/c/ddgjax/xla"
    assert compile_cache_dir({}).endswith(os.path.join(".cache", "ddgjax", "xla"))


def test_compile_cache_keeps_every_program_unless_jax_is_told_otherwise():
    from ddgjax.cli import cache_min_compile_time

    assert cache_min_compile_time({}) == 0.0
    assert cache_min_compile_time({"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "2"}) is None


def test_eval_json_scores_a_benchmark_as_its_table_does(tmp_path, capsys):
    """Without --protocol/--validity, eval.json uses the benchmark's protocol and validity
    rule (SPECTRE Planar-64: SPECTRE's MMDs with the spectral statistic, and V.U.N. under
    the planar rule); a source that is no benchmark gets the paper's protocol, no V.U.N."""
    import shutil

    from ddgjax.cli import sample as sample_cli
    from ddgjax.data import benchmark_evaluation

    assert benchmark_evaluation("spectre_sbm") == ("spectre", "sbm")
    assert benchmark_evaluation("my_graphs.json") == ("paper", None)
    wd = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "run_v0_1", wd)
    config = json.loads((wd / "config.json").read_text())
    config["data"]["source"] = "spectre_planar_64"
    config["sample"].update(num_steps=2, num_samples=3)
    (wd / "config.json").write_text(json.dumps(config))
    common = ["ddgjax-sample", f"--workdir={wd}", "--quiet"]
    assert sample_cli.main(common) == 0
    ev = json.loads((wd / "samples" / "eval.json").read_text())
    assert {"spectral", "valid", "unique", "novel", "vun"} <= set(ev)
    assert sample_cli.main(common + ["--protocol=paper", "--validity=none"]) == 0
    ev = json.loads((wd / "samples" / "eval.json").read_text())
    assert "spectral" not in ev and "vun" not in ev
