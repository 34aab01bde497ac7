"""The bundled configs: the paper's experiments, one best recipe per benchmark dataset, the
config checks, and the upgrade of configs recorded by older versions.

No JAX here: configs only need ml_collections.
"""
import json
import os

import pytest

from configs import default, paper
from helpers import REPO

# spec -> (dataset, PPGN hidden, PPGN blocks, T, epochs, diffusion kind, loss)
EXPECTED = {
    "community_small,ppgn,simple": ("community_small", 32, 6, 32, 5000, "discrete", "simple"),
    "community_small,edp,vb": ("community_small", 32, 6, 32, 5000, "discrete", "vb"),
    "ego_small,ppgn,vb": ("ego_small", 32, 6, 32, 5000, "discrete", "vb"),
    "sbm_27,edp,simple": ("sbm_27", 32, 6, 32, 5000, "discrete", "simple"),
    "planar_60,ppgn,simple": ("planar_60", 128, 8, 32, 2500, "discrete", "simple"),
    "planar_60,edp,vb": ("planar_60", 128, 8, 256, 2500, "discrete", "vb"),
    # the Gaussian baselines of the paper's tables
    "ego_small,ppgn,score": ("ego_small", 32, 6, 1000, 5000, "gaussian", "simple"),
    "planar_60,edp,score": ("planar_60", 128, 8, 1000, 2500, "gaussian", "simple"),
    # the named Planar-60 variants
    "planar_60,ppgn,simple,t128": ("planar_60", 128, 8, 128, 2500, "discrete", "simple"),
    "planar_60,ppgn,simple,ema_long": ("planar_60", 128, 8, 128, 4000, "discrete", "simple"),
}


@pytest.mark.parametrize("spec", sorted(EXPECTED))
def test_spec_key_values(spec):
    cfg = paper.get_config(spec)
    dataset, hidden, blocks, T, epochs, kind, loss = EXPECTED[spec]
    assert cfg.data.source == dataset
    assert cfg.model.name == spec.split(",")[1]
    assert (cfg.model.ppgn.hidden, cfg.model.ppgn.num_blocks) == (hidden, blocks)
    assert cfg.diffusion.num_timesteps == T and cfg.train.num_epochs == epochs
    assert cfg.diffusion.kind == kind and cfg.diffusion.loss == loss
    assert cfg.train.batch_size == 64 and cfg.train.lr == 1e-3


def test_all_specs_load_and_cover_the_table():
    specs = paper.all_specs()
    assert len(specs) == len(set(specs)) == 4 * 2 * 3 + 2
    assert set(EXPECTED) <= set(specs)
    for spec in specs:
        paper.get_config(spec)


def test_option_spelling_and_order():
    ema = paper.get_config("planar_60,ppgn,simple,ema_long").to_dict()
    assert paper.get_config("planar_60,ppgn,simple,t128,ema_long").to_dict() == ema
    assert paper.get_config("planar_60,ppgn,simple,ema_long,t128").to_dict() == ema
    assert paper.get_config(" planar_60, ppgn ,simple ").to_dict() == \
        paper.get_config("planar_60,ppgn,simple").to_dict()
    cfg = paper.get_config("planar_60,ppgn,simple,ema_long")
    assert cfg.train.ema_decay == 0.999 and cfg.sample.use_ema and cfg.sample.num_steps == 32
    assert cfg.model.compute_dtype == "bfloat16"


@pytest.mark.parametrize("spec, bad", [
    ("planar,ppgn,simple", "dataset 'planar'"),
    ("planar_60,gin,simple", "model 'gin'"),
    ("planar_60,ppgn,elbo", "loss 'elbo'"),
    ("planar_60,ppgn,simple,t64", "option 't64'"),
    ("planar_60,ppgn,simple,t128,t128", "repeated option 't128'"),
    ("ego_small,ppgn,simple,t128", "option 't128' with ego_small,ppgn,simple"),
    ("planar_60,ppgn", "2 field(s)"),
    ("planar_60,,simple", "empty field"),
])
def test_bad_specs(spec, bad):
    with pytest.raises(ValueError) as err:
        paper.get_config(spec)
    msg = str(err.value)
    assert bad in msg and "\n" not in msg
    for choice in (*paper.DATASETS, *paper.MODELS, *paper.LOSSES, *paper.OPTIONS):
        assert choice in msg


@pytest.mark.parametrize("spec", [None, "", "  "])
def test_missing_spec(spec):
    with pytest.raises(ValueError, match=r"needs an experiment: --config configs/paper.py:DATASET"):
        paper.get_config() if spec is None else paper.get_config(spec)


# ----------------------------------------------------------------------------
# one config per benchmark dataset: its default is the published row's recipe


def test_every_dataset_config_exists_and_reads_its_named_dataset():
    from ddgjax.configuration import DATASET_CONFIGS, get_config
    from ddgjax.data import BUNDLED_NAMES
    from ddgjax.data.large_sets import LARGE_NAMES

    for name in DATASET_CONFIGS:
        assert (REPO / "configs" / f"{name}.py").is_file(), name
        cfg = get_config(name)
        assert cfg.data.source == name and name in BUNDLED_NAMES + LARGE_NAMES


def test_the_spectre_planar_64_config_is_the_headline_recipe():
    """The recipe of the 97 % V.U.N. row: training and sampler settings, last checkpoint."""
    from ddgjax.configuration import get_config

    cfg = get_config("spectre_planar_64")
    assert (cfg.model.ppgn.num_blocks, cfg.model.ppgn.hidden, cfg.model.ppgn.noise_features) \
        == (8, 128, "log")
    assert (cfg.diffusion.continuous_time, cfg.diffusion.prior, cfg.diffusion.train_grid,
            cfg.diffusion.num_timesteps) == (True, "marginal", "power:2", 128)
    assert (cfg.train.batch_size, cfg.train.num_epochs, cfg.train.ema_decay,
            cfg.model.compute_dtype) == (32, 5000, 0.999, "bfloat16")
    s = cfg.sample
    assert (s.algorithm, s.num_steps, s.grid, s.use_ema, s.checkpoint, s.num_samples) == \
        (2, 64, "power:3", True, "latest", 40)
    assert (s.renoise_mix, s.logit_scale) == (0.0, 1.0)


@pytest.mark.parametrize("name, blocks, steps, grid, checkpoint, extra", [
    ("planar_60", 10, 32, "power:4", "latest", {}),
    ("spectre_sbm", 8, 64, "power:3", "best_val",
     {"buckets": "64,96,128,187", "pad_multiple": 32, "logit_scale": 0.9, "num_epochs": 2000,
      "validity": "sbm"}),
    ("spectre_comm20", 8, 128, "power:3", "best_val", {"metric": "mmd", "validity": ""}),
])
def test_the_other_spectre_style_recipes(name, blocks, steps, grid, checkpoint, extra):
    from ddgjax.configuration import get_config

    cfg = get_config(name)
    assert cfg.model.ppgn.num_blocks == blocks
    assert (cfg.sample.num_steps, cfg.sample.grid, cfg.sample.checkpoint) == \
        (steps, grid, checkpoint)
    where = {"buckets": cfg.data, "pad_multiple": cfg.model.ppgn, "logit_scale": cfg.sample,
             "num_epochs": cfg.train, "validity": cfg.validation, "metric": cfg.validation}
    for key, value in extra.items():
        assert where[key][key] == value, key


@pytest.mark.parametrize("name, spec, algorithm", [
    ("community_small", "community_small,ppgn,simple", 0),
    ("ego_small", "ego_small,ppgn,simple", 1),     # Algorithm 1 on the L_simple model
    ("sbm_27", "sbm_27,ppgn,vb", 0)])
def test_the_small_datasets_use_their_best_paper_row(name, spec, algorithm):
    from ddgjax.configuration import get_config

    expected = paper.get_config(spec)
    expected.sample.algorithm = algorithm
    assert get_config(name).to_dict() == expected.to_dict()


def test_default_has_at_most_48_keys():
    """45 before conditional generation, which added condition.on and condition.dropout;
    data.bucket_max_batch came with the families recipe."""
    def leaves(d):
        return sum(leaves(v) if isinstance(v, dict) else 1 for v in d.values())

    assert leaves(default.get_config().to_dict()) <= 48


# ----------------------------------------------------------------------------
# bundled configs by name (ddgjax.configuration)


def test_every_paper_experiment_has_a_name():
    from ddgjax.configuration import bundled_configs, get_config

    names = bundled_configs()
    for spec in paper.all_specs():
        assert names[spec.replace(",", "_")] == ("paper.py", spec)
        assert get_config("paper:" + spec).to_dict() == paper.get_config(spec).to_dict()
    assert {"quickstart", "test", "default", "spectre_planar_64"} <= set(names)


def test_config_names_and_paths_resolve_alike(tmp_path, monkeypatch):
    from ddgjax.configuration import ConfigError, get_config, resolve_config_arg

    monkeypatch.chdir(tmp_path)   # names work from any directory
    path, _, arg = resolve_config_arg("ego_small_ppgn_simple").partition(":")
    assert os.path.basename(path) == "paper.py" and arg == "ego_small,ppgn,simple"
    assert resolve_config_arg("paper:ego_small,ppgn,simple") == f"{path}:{arg}"
    cfg = get_config("test")
    assert cfg.diffusion.num_timesteps == 8
    cfg.train.num_epochs = 3                      # existing fields can change ...
    with pytest.raises(AttributeError):
        cfg.train.num_epoch = 3                   # ... a misspelt one cannot be added
    assert get_config(f"{path}:planar_60,ppgn,vb").diffusion.loss == "vb"
    with pytest.raises(ConfigError, match="nope.py not found"):
        resolve_config_arg("configs/nope.py")
    with pytest.raises(ConfigError, match="neither a config file nor a bundled config"):
        resolve_config_arg("ego_small_ppgn")
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        get_config("paper:nope,ppgn,simple")


@pytest.mark.parametrize("field, value", [("checkpoint_every_epochs", 0), ("num_epochs", 0),
                                          ("batch_size", 0), ("lr", 0.0)])
def test_validate_config_names_the_train_field(field, value):
    from configs import test as test_config
    from ddgjax.configuration import ConfigError, validate_config

    cfg = test_config.get_config()
    cfg.train[field] = value
    with pytest.raises(ConfigError, match=f"config.train.{field}: expected"):
        validate_config(cfg)


def test_validate_config_refuses_a_negative_bucket_batch_cap():
    from configs import test as test_config
    from ddgjax.configuration import ConfigError, validate_config

    cfg = test_config.get_config()
    cfg.data.bucket_max_batch = -1
    with pytest.raises(ConfigError, match="config.data.bucket_max_batch: expected >= 0"):
        validate_config(cfg)


@pytest.mark.parametrize("value", [0, -32, True])
def test_validate_config_refuses_a_bad_pad_multiple(value):
    """config.model.ppgn.pad_multiple must be an integer >= 1, and above 1 only for PPGN."""
    from configs import test as test_config
    from ddgjax.configuration import ConfigError, validate_config

    cfg = test_config.get_config()
    cfg.model.ppgn.pad_multiple = value
    with pytest.raises(ConfigError, match="config.model.ppgn.pad_multiple: expected an integer"):
        validate_config(cfg)
    cfg = test_config.get_config()
    cfg.model.ppgn.pad_multiple = 32
    validate_config(cfg)
    cfg.model.name = "edp"
    with pytest.raises(ConfigError, match="pad_multiple: only for PPGN"):
        validate_config(cfg)


def test_validate_config_refuses_an_unknown_checkpoint():
    from configs import test as test_config
    from ddgjax.configuration import ConfigError, validate_config

    cfg = test_config.get_config()
    cfg.sample.checkpoint = "last"
    with pytest.raises(ConfigError, match="config.sample.checkpoint: expected one of"):
        validate_config(cfg)


# ----------------------------------------------------------------------------
# configs recorded by ddgjax 0.1 (ddgjax.configuration.upgrade_run_config)


def old_config() -> dict:
    with open(REPO / "tests" / "data" / "run_v0_1" / "config.json") as f:
        return json.load(f)


def test_the_0_1_fixture_upgrades_to_todays_keys():
    from ddgjax.configuration import complete_run_config

    cfg = complete_run_config(old_config(), "run/config.json")
    assert cfg.to_dict().keys() == default.get_config().to_dict().keys()
    assert (cfg.model.ppgn.hidden, cfg.model.ppgn.kernels, cfg.sample.checkpoint) == \
        (8, "xla", "best")


@pytest.mark.parametrize("fused, pallas, kernels", [(False, False, "xla"), (True, False, "xla"),
                                                    (True, True, "pallas")])
def test_fused_and_pallas_become_kernels(fused, pallas, kernels):
    from ddgjax.configuration import complete_run_config

    tree = old_config()
    tree["model"]["ppgn"].update(fused=fused, pallas=pallas)
    assert complete_run_config(tree, "c.json").model.ppgn.kernels == kernels


def test_removed_levers_at_off_are_dropped_and_on_are_refused_in_one_line():
    from ddgjax.configuration import ConfigError, complete_run_config

    tree = old_config()
    tree["model"]["ppgn"].update(film=False, walk_features=0, fp8_weights=False)
    tree["sample"].update(target_guidance=0.0, final_pass=False)
    tree["train"].update(flat_update=False, concurrent_kernels=True)   # dropped whatever
    complete_run_config(tree, "c.json")
    tree["model"]["ppgn"]["film"] = True
    with pytest.raises(ConfigError) as err:
        complete_run_config(tree, "runs/x/config.json")
    msg = str(err.value)
    assert "runs/x/config.json" in msg and "model.ppgn.film = True" in msg and "\n" not in msg
    assert "0.1.0" in msg


def test_the_graph_transformer_and_unknown_keys_are_refused():
    from ddgjax.configuration import ConfigError, complete_run_config

    tree = old_config()
    tree["model"]["name"] = "gt"
    with pytest.raises(ConfigError, match="graph transformer"):
        complete_run_config(tree, "c.json")
    tree = old_config()
    tree["train"]["warmup"] = 10
    with pytest.raises(ConfigError, match="unknown config key train.warmup"):
        complete_run_config(tree, "c.json")
