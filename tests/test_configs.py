"""configs/paper.py: every spec gives the config its old per-experiment file gave; bad specs fail.

No JAX here: configs only need ml_collections.
"""
import os

import pytest

from configs import default, paper

# spec -> (dataset file, PPGN hidden, PPGN blocks, T, epochs, diffusion kind, loss)
EXPECTED = {
    "community_small,ppgn,simple": ("community_small.json", 32, 6, 32, 5000, "discrete", "simple"),
    "community_small,ppgn,vb": ("community_small.json", 32, 6, 32, 5000, "discrete", "vb"),
    "community_small,edp,simple": ("community_small.json", 32, 6, 32, 5000, "discrete", "simple"),
    "community_small,edp,vb": ("community_small.json", 32, 6, 32, 5000, "discrete", "vb"),
    "ego_small,ppgn,simple": ("ego_small.json", 32, 6, 32, 5000, "discrete", "simple"),
    "ego_small,ppgn,vb": ("ego_small.json", 32, 6, 32, 5000, "discrete", "vb"),
    "ego_small,edp,simple": ("ego_small.json", 32, 6, 32, 5000, "discrete", "simple"),
    "ego_small,edp,vb": ("ego_small.json", 32, 6, 32, 5000, "discrete", "vb"),
    "sbm_27,ppgn,simple": ("sbm_27.json", 32, 6, 32, 5000, "discrete", "simple"),
    "sbm_27,ppgn,vb": ("sbm_27.json", 32, 6, 32, 5000, "discrete", "vb"),
    "sbm_27,edp,simple": ("sbm_27.json", 32, 6, 32, 5000, "discrete", "simple"),
    "sbm_27,edp,vb": ("sbm_27.json", 32, 6, 32, 5000, "discrete", "vb"),
    "planar_60,ppgn,simple": ("planar_60.json", 128, 8, 32, 2500, "discrete", "simple"),
    "planar_60,ppgn,vb": ("planar_60.json", 128, 8, 32, 2500, "discrete", "vb"),
    "planar_60,edp,simple": ("planar_60.json", 128, 8, 256, 2500, "discrete", "simple"),
    "planar_60,edp,vb": ("planar_60.json", 128, 8, 256, 2500, "discrete", "vb"),
    # the Gaussian baselines of the paper's tables
    "community_small,ppgn,score": ("community_small.json", 32, 6, 1000, 5000, "gaussian", "simple"),
    "ego_small,ppgn,score": ("ego_small.json", 32, 6, 1000, 5000, "gaussian", "simple"),
    "sbm_27,edp,score": ("sbm_27.json", 32, 6, 1000, 5000, "gaussian", "simple"),
    "planar_60,edp,score": ("planar_60.json", 128, 8, 1000, 2500, "gaussian", "simple"),
    # the named Planar-60 variants
    "planar_60,ppgn,simple,t128": ("planar_60.json", 128, 8, 128, 2500, "discrete", "simple"),
    "planar_60,ppgn,simple,ema_long": ("planar_60.json", 128, 8, 128, 4000, "discrete", "simple"),
}


@pytest.mark.parametrize("spec", sorted(EXPECTED))
def test_spec_key_values(spec):
    cfg = paper.get_config(spec)
    fname, hidden, blocks, T, epochs, kind, loss = EXPECTED[spec]
    assert cfg.data.source == paper.data_source(fname)
    assert cfg.model.name == spec.split(",")[1]
    assert (cfg.model.ppgn.hidden, cfg.model.ppgn.num_blocks) == (hidden, blocks)
    assert cfg.diffusion.num_timesteps == T and cfg.train.num_epochs == epochs
    assert cfg.diffusion.kind == kind and cfg.diffusion.loss == loss
    assert cfg.train.batch_size == 64 and cfg.train.lr == 1e-3


def legacy_config(name):
    """The config the per-experiment file ``configs/<name>.py`` gave before they were
    merged into paper.py, rebuilt here from default.py exactly as those files did."""
    variant = ""
    for suffix in ("_t128_ema_long", "_t128"):
        if name.endswith(suffix):
            name, variant = name[: -len(suffix)], suffix
    head, model, loss = name.rsplit("_", 2)
    cfg = default.get_config()
    fname, hidden, blocks, epochs = {"community_small": ("community_small.json", 32, 6, 5000),
                                     "ego_small": ("ego_small.json", 32, 6, 5000),
                                     "sbm_27": ("sbm_27.json", 32, 6, 5000),
                                     "planar_60": ("planar_60.json", 128, 8, 2500)}[head]
    cfg.data.source = paper.data_source(fname)
    cfg.model.name = model
    cfg.model.ppgn.hidden = hidden
    cfg.model.ppgn.num_blocks = blocks
    cfg.diffusion.loss = "simple" if loss == "score" else loss
    cfg.diffusion.num_timesteps = 256 if (model == "edp" and head == "planar_60") else 32
    cfg.train.num_epochs = epochs
    cfg.train.batch_size = 64
    cfg.train.checkpoint_every_epochs = 100
    cfg.train.log_every_epochs = 50
    if loss == "score":
        cfg.diffusion.kind = "gaussian"
        cfg.diffusion.num_timesteps = 1000
    if variant:
        cfg.diffusion.num_timesteps = 128
        cfg.sample.num_steps = 32
        cfg.model.compute_dtype = "bfloat16"
    if variant == "_t128_ema_long":
        cfg.train.num_epochs = 4000
        cfg.train.ema_decay = 0.999
        cfg.sample.use_ema = True
    return cfg


def spec_to_legacy_name(spec):
    fields = spec.split(",")
    name = "_".join(fields[:3])
    if "ema_long" in fields:
        return name + "_t128_ema_long"
    return name + ("_t128" if "t128" in fields else "")


@pytest.mark.parametrize("spec", sorted(EXPECTED))
def test_spec_equals_the_old_per_experiment_file(spec):
    assert paper.get_config(spec).to_dict() == legacy_config(spec_to_legacy_name(spec)).to_dict()


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
    ("planar_60,ppgn,vb,ema_long", "option 'ema_long' with planar_60,ppgn,vb"),
    ("planar_60,ppgn", "2 field(s)"),
    ("planar_60", "1 field(s)"),
    ("planar_60,,simple", "empty field"),
    ("planar_60,ppgn,simple,", "empty field"),
])
def test_bad_specs(spec, bad):
    with pytest.raises(ValueError) as err:
        paper.get_config(spec)
    msg = str(err.value)
    assert bad in msg and "\n" not in msg
    # the message lists the valid choices
    for choice in (*paper.DATASETS, *paper.MODELS, *paper.LOSSES, *paper.OPTIONS):
        assert choice in msg


@pytest.mark.parametrize("spec", [None, "", "  "])
def test_missing_spec(spec):
    with pytest.raises(ValueError, match=r"needs an experiment: --config configs/paper.py:DATASET"):
        paper.get_config() if spec is None else paper.get_config(spec)


def test_best_recipes():
    from configs import best

    cfg = best.get_config("planar_60")
    assert cfg.data.source == paper.data_source("planar_60.json")
    assert (cfg.diffusion.continuous_time, cfg.diffusion.prior, cfg.diffusion.num_timesteps) == \
        (True, "marginal", 128)
    assert (cfg.train.batch_size, cfg.train.num_epochs, cfg.train.ema_decay) == (32, 5000, 0.999)
    assert (cfg.sample.algorithm, cfg.sample.num_steps, cfg.sample.grid, cfg.sample.use_ema) == \
        (2, 32, "power:4", True)
    assert (cfg.model.ppgn.noise_features, cfg.diffusion.train_grid) == ("log", "power:2")
    assert (cfg.model.ppgn.num_blocks, cfg.model.ppgn.hidden) == (10, 128)
    assert (cfg.validation.every_epochs, cfg.validation.metric) == (500, "valid")
    p64 = best.get_config("spectre_planar_64")
    assert p64.data.source == paper.data_source("spectre_planar_64.json")
    assert (p64.sample.algorithm, p64.sample.num_steps) == (2, 64)
    assert p64.model.ppgn.num_blocks == 8
    with pytest.raises(ValueError, match="configs/best.py needs a dataset"):
        best.get_config(None)


# ----------------------------------------------------------------------------
# bundled configs by name (ddgjax.configuration)


def test_every_paper_experiment_has_a_name():
    from ddgjax.configuration import bundled_configs, get_config

    names = bundled_configs()
    for spec in paper.all_specs():
        name = spec.replace(",", "_")
        assert names[name] == ("paper.py", spec)
        assert get_config(name).to_dict() == paper.get_config(spec).to_dict()
    assert {"quickstart", "test", "default", "best_planar_60"} <= set(names)
    assert "ego_small_ppgn_simple" in names


def test_config_names_and_paths_resolve_alike(tmp_path, monkeypatch):
    from ddgjax.configuration import ConfigError, get_config, resolve_config_arg

    monkeypatch.chdir(tmp_path)   # names work from any directory
    path, _, arg = resolve_config_arg("ego_small_ppgn_simple").partition(":")
    assert os.path.basename(path) == "paper.py" and arg == "ego_small,ppgn,simple"
    cfg = get_config("test")
    assert cfg.diffusion.num_timesteps == 8
    cfg.train.num_epochs = 3                      # existing fields can change ...
    with pytest.raises(AttributeError):
        cfg.train.num_epoch = 3                   # ... a misspelt one cannot be added
    spec_path = f"{path}:planar_60,ppgn,vb"
    assert get_config(spec_path).diffusion.loss == "vb"
    with pytest.raises(ConfigError, match="nope.py not found"):
        resolve_config_arg("configs/nope.py")
    with pytest.raises(ConfigError, match="neither a config file nor a bundled config"):
        resolve_config_arg("ego_small_ppgn")


def test_paper_configs_read_the_bundled_datasets_unless_ddgjax_data_is_set(monkeypatch):
    from ddgjax.data import BUNDLED_NAMES

    monkeypatch.setattr(paper, "DATA_DIR", "")
    assert paper.get_config("sbm_27,ppgn,simple").data.source == "sbm_27" in BUNDLED_NAMES
    monkeypatch.setattr(paper, "DATA_DIR", "/my/data")
    assert paper.get_config("sbm_27,ppgn,simple").data.source == "/my/data/sbm_27.json"


@pytest.mark.parametrize("field, value", [("log_every_epochs", 0),
                                          ("checkpoint_every_epochs", 0),
                                          ("num_epochs", 0), ("batch_size", 0)])
def test_validate_config_names_the_train_field(field, value):
    """Values no training loop can use are refused by field before anything trains
    (log_every_epochs = 0 used to stop a run with a division by zero after its first
    chunk)."""
    from configs import test as test_config
    from ddgjax.configuration import ConfigError, validate_config

    cfg = test_config.get_config()
    cfg.train[field] = value
    with pytest.raises(ConfigError, match=f"config.train.{field}: expected"):
        validate_config(cfg)


@pytest.mark.parametrize("value", [0, -32, True])
def test_validate_config_refuses_a_bad_pad_multiple(value):
    """config.model.ppgn.pad_multiple must be an integer >= 1; the error names the field
    before anything trains. (ml_collections itself refuses a float or string there.)"""
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
