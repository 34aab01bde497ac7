"""The Python API of the README (``import ddgjax``), end to end on a tiny config."""
import subprocess
import sys

import networkx as nx
import pytest

import ddgjax
from ddgjax.sampling import SamplingError


def test_import_is_cheap():
    """``import ddgjax`` alone loads neither JAX nor the models."""
    code = ("import sys, ddgjax; heavy = [m for m in ('jax', 'flax', 'ddgjax.training') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_readme_example_on_the_test_config(tmp_path):
    cfg = ddgjax.get_config("test")
    cfg.train.num_epochs = 2
    summary = ddgjax.train(cfg, str(tmp_path / "run"), verbose=False)
    assert summary["epochs"] == 2
    model = ddgjax.load(str(tmp_path / "run"))                    # the config's checkpoint
    assert model.checkpoint == "best"
    graphs = model.sample(6, seed=0)
    assert len(graphs) == 6 and all(isinstance(g, nx.Graph) for g in graphs)
    assert [g.number_of_nodes() for g in graphs] == \
        [g.number_of_nodes() for g in model.sample(6, seed=0)]      # seeded
    assert [g.number_of_nodes() for g in model.sample(3, num_nodes=7)] == [7, 7, 7]
    ds = ddgjax.load_dataset("community_small")
    assert len(ds.train) == 80 and len(ds.test) == 20
    scores = ddgjax.evaluate(graphs, ds.test, protocol="paper")
    assert {"degree", "clustering", "orbit", "avg"} <= set(scores)
    import ddgjax.evaluate as module   # the module is the same callable
    assert module is ddgjax.evaluate and module(graphs, ds.test)["avg"] == scores["avg"]
    latest = ddgjax.load(str(tmp_path / "run"), checkpoint="latest")
    assert latest.meta["epoch"] == 2


def test_load_says_what_is_missing(tmp_path):
    with pytest.raises(SamplingError, match="workdir not found"):
        ddgjax.load(str(tmp_path / "nothing"))


def test_train_with_seeds_trains_them_in_one_program(tmp_path, monkeypatch):
    """``ddgjax.train(..., seeds=[...])`` is ``training.train_seeds`` (stubbed here; the runs
    themselves: test_training.py::test_train_seeds_*)."""
    from ddgjax import training

    calls = []
    monkeypatch.setattr(training, "train_seeds", lambda *a, **k: calls.append((a, k)) or {})
    ddgjax.train("test", str(tmp_path), seeds=(0, 1), verbose=False)
    (config, workdir, seeds), kwargs = calls[0]
    assert workdir == str(tmp_path) and seeds == [0, 1] and config.train.num_epochs == 4
    assert kwargs == {"restart": False, "verbose": False, "stop_after_epochs": None}


def test_a_source_checkout_maps_configs_as_an_attribute_too(monkeypatch):
    """Uninstalled checkout (as on the accelerator machine): configs/ is registered as
    ``ddgjax.configs`` and bound on the package, so ``ddgjax.configs.__file__`` works
    (the bundled-config lookup reads it)."""
    import importlib.util
    import sys

    import ddgjax

    monkeypatch.delitem(sys.modules, "ddgjax.configs", raising=False)
    monkeypatch.delattr(ddgjax, "configs", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    ddgjax._map_source_configs()
    assert ddgjax.configs.__file__.endswith("configs/__init__.py")
    assert sys.modules["ddgjax.configs"] is ddgjax.configs


def test_load_takes_the_fast_path_arguments():
    """ddgjax.load passes compute_dtype and kernels on to the trained-model loader."""
    import inspect

    import ddgjax

    params = inspect.signature(ddgjax.load).parameters
    assert {"compute_dtype", "kernels", "pad_multiple"} <= set(params)
    assert params["checkpoint"].default is None            # the run's config.sample.checkpoint
