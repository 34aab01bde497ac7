"""Command line: python -m ddgjax.evaluate."""
import json
import os
import subprocess
import sys

import networkx as nx
import pytest

from ddgjax.data import write_graph_list
from ddgjax.evaluate import main, parse_graph_spec
from helpers import DATA_DIR, REPO, needs_data


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_parse_graph_spec(tmp_path):
    assert parse_graph_spec("a/b.json:test") == ("a/b.json", "test")
    assert parse_graph_spec("a/b.json") == ("a/b.json", None)
    odd = tmp_path / "x:y"                      # an existing file whose name has a colon
    odd.write_text("[]")
    assert parse_graph_spec(str(odd)) == (str(odd), None)
    assert parse_graph_spec("c:/dir/file.json") == ("c:/dir/file.json", None)


@needs_data
def test_paper_protocol_with_floor(capsys):
    code, out, err = run(capsys, "--reference", f"{DATA_DIR}/community_small.json:test",
                         "--generated", f"{DATA_DIR}/community_small.json:train")
    assert code == 0, err
    res = json.loads(out)
    assert out.count("\n") == 1
    for k in ("degree", "clustering", "orbit", "avg"):
        assert res[f"{k}_ratio"] == pytest.approx(1.0)
    assert "spectral" not in res
    assert res["degree"] == pytest.approx(0.022954603523803074, abs=1e-6)
    assert res["train"].endswith("community_small.json:train")


@needs_data
def test_spectre_protocol_with_validity(capsys, tmp_path):
    gen = [nx.grid_2d_graph(8, 8), nx.complete_graph(6)]
    gen = [nx.convert_node_labels_to_integers(g) for g in gen]
    path = tmp_path / "gen.json"
    write_graph_list(path, gen)
    code, out, err = run(capsys, "--reference", f"{DATA_DIR}/spectre_planar_64.json:test",
                         "--generated", str(path), "--protocol", "spectre",
                         "--validity", "planar",
                         "--train", f"{DATA_DIR}/spectre_planar_64.json:train")
    assert code == 0, err
    res = json.loads(out)
    for k in ("degree", "clustering", "orbit", "spectral", "spectral_ratio", "valid", "unique",
              "novel", "vun"):
        assert k in res, k
    assert res["valid"] == 0.5 and res["unique"] == 1.0 and res["novel"] == 1.0
    assert res["vun"] == 0.5


def test_whole_file_without_split_has_no_floor(capsys, tmp_path):
    ref, gen = tmp_path / "ref.json", tmp_path / "gen.json"
    write_graph_list(ref, [nx.cycle_graph(5), nx.path_graph(6)])
    write_graph_list(gen, [nx.cycle_graph(6)])
    code, out, _ = run(capsys, "--reference", str(ref), "--generated", str(gen))
    assert code == 0
    res = json.loads(out)
    assert "degree_ratio" not in res and res["train"] is None


@pytest.mark.parametrize("case", ["missing file", "unknown split", "empty list",
                                  "empty split", "validity without train", "bad json"])
def test_bad_input_one_line_error(capsys, tmp_path, case):
    good = tmp_path / "good.json"
    write_graph_list(good, [nx.cycle_graph(5)], split={"train": [0], "nothing": []})
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"graphs": []}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    argv = {
        "missing file": ["--reference", str(tmp_path / "nope.json"), "--generated", str(good)],
        "unknown split": ["--reference", f"{good}:test", "--generated", str(good)],
        "empty list": ["--reference", str(good), "--generated", str(empty)],
        "empty split": ["--reference", str(good), "--generated", f"{good}:nothing"],
        "validity without train": ["--reference", str(good), "--generated", str(good),
                                   "--validity", "planar"],
        "bad json": ["--reference", str(bad), "--generated", str(good)],
    }[case]
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err


def test_usage_error_returns_status(capsys):
    code, _, err = run(capsys, "--reference", "x.json")
    assert code == 2 and "required" in err


def test_module_entry_point(tmp_path):
    ref = tmp_path / "ref.json"
    write_graph_list(ref, [nx.cycle_graph(5), nx.path_graph(6)])
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-m", "ddgjax.evaluate", "--reference", str(ref),
                           "--generated", str(ref), "--protocol", "spectre"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["degree"] == pytest.approx(0.0, abs=1e-9) and "spectral" in res
    # (the exit status of bad input, in-process: test_bad_input_one_line_error)
