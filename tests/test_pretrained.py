"""One portable file per model (ddgjax.pretrained): export, load without pickle, sample
from Python and the command line, and one-line errors for files that cannot be used."""
import json

import jax
import numpy as np
import pytest

import ddgjax
from configs import test as test_config
from ddgjax import pretrained, training
from ddgjax.cli import sample as sample_cli
from ddgjax.sampling import load_run

from helpers import keep_signal_handlers  # noqa: F401 - an autouse fixture
from helpers import the_error_line as error_line


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained")
    training.train(test_config.get_config(), str(root / "run"), verbose=False)
    meta = pretrained.export(str(root / "run"), str(root / "m.npz"), note={"card": "cpu"})
    return root, meta


def test_the_file_holds_the_runs_parameters_in_float16(exported):
    root, meta = exported
    assert meta["format"] == pretrained.FORMAT and meta["note"] == {"card": "cpu"}
    run = load_run(str(root / "run"))
    loaded = pretrained.load_pretrained(str(root / "m.npz"))
    for a, b in zip(jax.tree_util.tree_leaves(run.params),
                    jax.tree_util.tree_leaves(loaded.params)):
        np.testing.assert_array_equal(np.asarray(a, np.float32).astype(np.float16)
                                      .astype(np.float32), b)
    assert loaded.max_nodes == run.max_nodes and loaded.config.model == run.config.model
    assert 0 < meta["max_abs_rounding"] < 1e-2


def test_sampling_from_python_and_the_command_line(exported, tmp_path, monkeypatch):
    root, _ = exported
    model = ddgjax.load(f"pretrained:{root / 'm.npz'}")
    graphs = model.sample(6, seed=1)
    assert len(graphs) == 6 and all(g.number_of_nodes() > 0 for g in graphs)
    # completion keeps the known pairs; the bound is finite: both work on a pretrained file
    import networkx as nx

    adjacency = nx.to_numpy_array(graphs[0])
    known = np.ones_like(adjacency, bool)
    known[0, 1] = known[1, 0] = False
    done = model.complete(adjacency, known, num_samples=2)
    assert len(done) == 2
    for g in done:
        a = nx.to_numpy_array(g, nodelist=range(len(adjacency)))
        assert np.array_equal(a[known], adjacency[known])
    bits = model.nll(graphs[:2], num_samples=2)
    assert bits.shape == (2,) and np.all(np.isfinite(bits)) and np.all(bits > 0)
    monkeypatch.chdir(tmp_path)
    assert sample_cli.main(["s", f"--pretrained={root / 'm.npz'}", "--num_samples=4",
                            "--quiet"]) == 0
    made = json.loads((tmp_path / "m-samples" / "samples.json").read_text())
    assert len(made["graphs"]) == 4 and made["generated_by"]["pretrained"] == str(root / "m.npz")


def test_unusable_files_are_one_line(exported, tmp_path, capsys):
    root, _ = exported
    with np.load(root / "m.npz", allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(arrays["meta"].tobytes().decode())
    key = next(k for k in arrays if k.startswith("param/"))

    def variant(name, **change):
        path = tmp_path / name
        np.savez(path, **{**arrays, **change})
        return path

    truncated = tmp_path / "cut.npz"
    truncated.write_bytes((root / "m.npz").read_bytes()[:200])
    other = variant("other.npz", meta=np.frombuffer(
        json.dumps({**meta, "format": "something-else"}).encode(), np.uint8))
    wrong = variant("wrong.npz", **{key: np.zeros((3, 3, 3), np.float16)})
    cases = {truncated: "not a readable pretrained file", other: "meta.format",
             wrong: f"parameter '{key[len('param/'):]}' has shape",
             tmp_path / "absent.npz": "neither a shipped pretrained model"}
    for path, words in cases.items():
        assert sample_cli.main(["s", f"--pretrained={path}", "--quiet",
                                f"--out={tmp_path / 'never'}"]) == 1
        line = error_line(capsys)
        assert words in line and str(path.name) in line, line
    assert sample_cli.main(["s", f"--pretrained={root / 'm.npz'}", "--checkpoint=latest",
                            f"--out={tmp_path / 'never'}"]) == 1
    assert "--checkpoint" in error_line(capsys)
    assert sample_cli.main(["s", f"--pretrained={root / 'm.npz'}", f"--workdir={root}"]) == 2
    assert not (tmp_path / "never").exists()


def test_a_note_is_merged_in_place_and_the_parameters_stay(exported, tmp_path):
    root, _ = exported
    path = tmp_path / "m.npz"
    path.write_bytes((root / "m.npz").read_bytes())
    before = pretrained.read(str(path))[1]
    meta = pretrained.write_note(str(path), {"headline": "test model"})
    assert meta["note"] == {"card": "cpu", "headline": "test model"}
    after_meta, after = pretrained.read(str(path))
    assert after_meta["note"] == meta["note"] and after.keys() == before.keys()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert pretrained.main(["note", f"--file={path}", "--note=[1]"]) == 1


def test_the_shipped_models_are_listed_with_their_numbers_and_load():
    shipped = pretrained.names()
    assert {"spectre_planar_64", "planar_60", "community_small", "ego_small", "sbm_27",
            "spectre_comm20", "sbm_l", "lobster_l"} <= set(shipped)
    for name, headline in shipped.items():
        assert any(m in headline for m in ("V.U.N.", "MMD", "valid")), name
        run = pretrained.load_pretrained(name)
        meta = pretrained.read_meta(pretrained.resolve(f"pretrained:{name}"))
        assert run.config.data.source == meta["config"]["data"]["source"]
        for field in ("commit", "card", "training_seconds", "command"):
            assert meta["note"].get(field), (name, field)
