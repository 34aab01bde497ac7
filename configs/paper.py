"""The paper's experiments, one config file for all of them.

The experiment is the text after ``:`` in the config path (ml_collections passes
it to ``get_config``)::

    python train.py --config configs/paper.py:planar_60,ppgn,simple --workdir runs/planar

Spec grammar: ``DATASET,MODEL,LOSS[,OPTION...]``

* DATASET: ``community_small``, ``ego_small``, ``sbm_27``, ``planar_60``
* MODEL: ``ppgn``, ``edp``
* LOSS: ``simple`` (L_simple), ``vb`` (L_vb), or ``score``: the Gaussian baseline
  ("PPGN-Score" / "EDP-Score" of the paper's tables; docs/gaussian.md), i.e. the
  ``simple`` config of that dataset and model with ``diffusion.kind = "gaussian"``
  and T = 1000 levels.
* OPTION (only with ``planar_60,ppgn,simple``; any order):
  ``t128``: trained on a grid of T = 128 levels, sampled with 32 strided steps,
  bfloat16 compute. (Not the original code's setup: it trained in continuous
  time and sampled Planar on 64 or 128 levels.)
  ``ema_long``: the ``t128`` variant trained for 4000 epochs with an EMA of the
  weights (decay 0.999) used for sampling. It implies ``t128``, so
  ``planar_60,ppgn,simple,ema_long`` and ``planar_60,ppgn,simple,t128,ema_long``
  are the same config.

A bad spec (unknown field, wrong number of fields, no spec at all) raises
ValueError with a one-line message listing the valid choices.

The hyper-parameters and where they come from: docs/method.md, "Training setup".
Datasets are the paper's exact graph lists, the copies bundled with the package
(``ddgjax/data/bundled``, named e.g. ``planar_60``), so these configs work from
any directory; ``--config.data.source`` points a run elsewhere.
"""
from ddgjax.configs import default

# dataset -> (PPGN hidden, PPGN blocks, epochs)
DATASETS = {
    "community_small": (32, 6, 5000),
    "ego_small": (32, 6, 5000),
    "sbm_27": (32, 6, 5000),
    "planar_60": (128, 8, 2500),
}
MODELS = ("ppgn", "edp")
LOSSES = ("simple", "vb", "score")
OPTIONS = ("t128", "ema_long")
# The named variants exist for this experiment only.
OPTIONS_FOR = ("planar_60", "ppgn", "simple")
GRAMMAR = "DATASET,MODEL,LOSS[,OPTION...]"


def _choices() -> str:
    return (f"DATASET one of {', '.join(DATASETS)}; MODEL one of {', '.join(MODELS)}; "
            f"LOSS one of {', '.join(LOSSES)}; OPTION one of {', '.join(OPTIONS)} "
            f"(only with {','.join(OPTIONS_FOR)})")


def _bad(spec: str, what: str) -> ValueError:
    return ValueError(f"configs/paper.py: {what} in spec {spec!r}; expected {GRAMMAR} with "
                      f"{_choices()}")


def parse_spec(spec):
    """``"planar_60,ppgn,simple,t128"`` -> ``("planar_60", "ppgn", "simple", ("t128",))``.

    Fields are stripped of surrounding spaces; options come back in ``OPTIONS`` order
    with ``ema_long`` implying ``t128``. Raises ValueError for a bad spec.
    """
    if spec is None or not str(spec).strip():
        raise ValueError(
            f"configs/paper.py needs an experiment: --config configs/paper.py:{GRAMMAR}, "
            f"e.g. configs/paper.py:planar_60,ppgn,simple; {_choices()}")
    spec = str(spec)
    fields = [f.strip() for f in spec.split(",")]
    if len(fields) < 3:
        raise _bad(spec, f"{len(fields)} field(s) instead of at least 3")
    if "" in fields:
        raise _bad(spec, "an empty field")
    dataset, model, loss, *options = fields
    if dataset not in DATASETS:
        raise _bad(spec, f"unknown dataset {dataset!r}")
    if model not in MODELS:
        raise _bad(spec, f"unknown model {model!r}")
    if loss not in LOSSES:
        raise _bad(spec, f"unknown loss {loss!r}")
    for opt in options:
        if opt not in OPTIONS:
            raise _bad(spec, f"unknown option {opt!r}")
        if options.count(opt) > 1:
            raise _bad(spec, f"repeated option {opt!r}")
        if (dataset, model, loss) != OPTIONS_FOR:
            raise _bad(spec, f"option {opt!r} with {dataset},{model},{loss}")
    chosen = set(options)
    if "ema_long" in chosen:
        chosen.add("t128")
    return dataset, model, loss, tuple(o for o in OPTIONS if o in chosen)


def paper_config(dataset: str, model: str, loss: str, options=()):
    """Config of one experiment (parsed fields of a spec; see the module docstring).

    ``simple``/``vb`` give a row of the paper's Tables 1-2. PPGN sizes follow the
    original code's configs (6 x 32 for the small sets, 8 x 128 for Planar-60);
    EDP-GNN uses the paper's setup (5 layers, 4 GIN steps, 4 channels, 16
    features) and T = 256 on Planar-60.
    """
    config = default.get_config()
    hidden, blocks, epochs = DATASETS[dataset]
    config.data.source = dataset
    config.model.name = model
    config.model.ppgn.hidden = hidden
    config.model.ppgn.num_blocks = blocks
    config.diffusion.loss = "simple" if loss == "score" else loss
    config.diffusion.num_timesteps = 256 if (model == "edp" and dataset == "planar_60") else 32
    config.train.num_epochs = epochs
    config.train.batch_size = 64
    config.train.checkpoint_every_epochs = 100
    if loss == "score":
        # Gaussian baseline: cosine alpha_bar schedule, epsilon-prediction, ancestral
        # DDPM sampling over all 1000 levels by default (--num_steps K strides).
        config.diffusion.kind = "gaussian"
        config.diffusion.num_timesteps = 1000
    if "t128" in options or "ema_long" in options:
        config.diffusion.num_timesteps = 128
        config.sample.num_steps = 32
        config.model.compute_dtype = "bfloat16"
    if "ema_long" in options:
        config.train.num_epochs = 4000
        config.train.ema_decay = 0.999
        config.sample.use_ema = True
    return config


def all_specs():
    """Every spec with a name: the 16 rows (4 datasets x 2 models x simple/vb), the 8
    Gaussian baselines (``score``) and the two Planar-60 variants."""
    specs = [f"{d},{m},{l}" for d in DATASETS for m in MODELS for l in LOSSES]
    return specs + [",".join(OPTIONS_FOR + ("t128",)), ",".join(OPTIONS_FOR + ("ema_long",))]


def get_config(spec=None):
    """The config of ``spec`` (``DATASET,MODEL,LOSS[,OPTION...]``); ValueError if bad."""
    return paper_config(*parse_spec(spec))
