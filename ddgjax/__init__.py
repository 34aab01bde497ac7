"""ddgjax: discrete denoising diffusion for graph generation in JAX/Flax.

A reimplementation of Haefeli, Martinkus, Perraudin & Wattenhofer (2022),
"Diffusion Models for Graphs Benefit From Discrete State Spaces".

The Python API (the same steps as the ``ddgjax-train``, ``ddgjax-sample`` and
``ddgjax-evaluate`` commands)::

    import ddgjax
    cfg = ddgjax.get_config("ego_small_ppgn_simple")   # a bundled config (or a file path)
    cfg.train.num_epochs = 100
    ddgjax.train(cfg, "runs/ego")                      # resumes if runs/ego holds this run
    model = ddgjax.load("runs/ego")                    # the config's checkpoint (or "best", ...)
    graphs = model.sample(64, seed=0)                  # list of networkx.Graph
    done = model.complete(adjacency, known, num_samples=16)   # graph completion (known pairs kept)
    bits = model.nll(graphs)                           # bits per pair (negative ELBO) per graph
    ds = ddgjax.load_dataset("ego_small")              # .train / .val / .test graph lists
    scores = ddgjax.evaluate(graphs, ds.test, protocol="paper")   # degree, clustering, ...

Importing ``ddgjax`` is cheap: JAX and the rest load on first use.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["evaluate", "get_config", "load", "load_dataset", "train", "__version__"]


def _map_source_configs() -> None:
    """In a source checkout that is not installed (e.g. ``python train.py`` from a clone,
    or a copy of the repository on an accelerator machine), ``configs/`` sits beside the
    package rather than inside it: register it as ``ddgjax.configs``, which an install
    provides through setuptools' ``package-dir``."""
    import importlib.util
    import os
    import sys

    if "ddgjax.configs" in sys.modules:
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = os.path.join(root, "configs")
    init = os.path.join(folder, "__init__.py")
    found = importlib.util.find_spec("ddgjax.configs")
    # A source checkout (configs/ and pyproject.toml beside the package) uses its own
    # configs even where an editable install of another checkout maps ddgjax.configs
    # elsewhere (e.g. a git worktree on PYTHONPATH).
    own = os.path.exists(init) and os.path.exists(os.path.join(root, "pyproject.toml"))
    if found is not None and not (own and found.origin and os.path.dirname(
            os.path.abspath(found.origin)) != folder):
        return
    if not os.path.exists(init):
        return
    spec = importlib.util.spec_from_file_location("ddgjax.configs", init,
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules["ddgjax.configs"] = module
    spec.loader.exec_module(module)
    globals()["configs"] = module  # what ``import ddgjax.configs`` binds on the package


_map_source_configs()


def get_config(name_or_path: str):
    """A config by bundled name (``"quickstart"``, ``"test"``, ``"ego_small_ppgn_simple"``,
    ``"spectre_planar_64"``, ...) or ``FILE[:ARG]`` path, as a locked ``ConfigDict``
    (fields can be changed, not added). See ``ddgjax.configuration.get_config``."""
    from ddgjax.configuration import get_config as _get_config

    return _get_config(name_or_path)


def train(config, workdir: str, *, restart: bool = False, verbose: bool = True,
          stop_after_epochs: int | None = None, seeds=None) -> dict:
    """Train ``config`` in ``workdir`` (what ``ddgjax-train`` does); returns a summary dict.

    Resumes when ``workdir`` holds a checkpoint of the same run; a run with other
    data or another model is refused unless ``restart=True`` (which moves it
    aside). ``config`` may also be a config name or path (as for :func:`get_config`).
    ``seeds=[0, 1, 2]`` trains one run per seed in one program (``ddgjax-train
    --seeds``): run ``s`` is ``workdir/seed_<s>``, the workdir a single run with
    ``config.train.seed = s`` leaves (``ddgjax.load(f"{workdir}/seed_0")``).
    See ``ddgjax.training.train`` and ``ddgjax.training.train_seeds``.
    """
    from ddgjax.training import train as _train, train_seeds as _train_seeds

    if isinstance(config, str):
        config = get_config(config)
    options = dict(restart=restart, verbose=verbose, stop_after_epochs=stop_after_epochs)
    if seeds is not None:
        return _train_seeds(config, workdir, list(seeds), **options)
    return _train(config, workdir, **options)


def load(workdir: str, checkpoint: str | None = None, use_ema: bool | None = None, *,
         compute_dtype: str | None = None, kernels: str | None = None,
         pad_multiple: int | None = None):
    """A trained run as a ``TrainedModel`` with ``.sample(n, seed=0)``, ``.complete(adjacency,
    known)`` and ``.nll(graphs)``; see ``ddgjax.trained``. ``checkpoint`` None: the one the
    run's config samples (``config.sample.checkpoint``). ``compute_dtype="bfloat16",
    kernels="pallas"`` samples with the fast path (GPU; docs/performance.md);
    ``pad_multiple=m`` has the PPGN pad its node axis to a multiple of m inside the call
    (the same function)."""
    from ddgjax.trained import load as _load

    return _load(workdir, checkpoint, use_ema=use_ema, compute_dtype=compute_dtype,
                 kernels=kernels, pad_multiple=pad_multiple)


def load_dataset(name_or_path: str, **kwargs):
    """A bundled dataset by name (``"planar_60"``, ``"spectre_sbm"``, ...), a graph file or
    directory, or ``"builtin:NAME"``: a ``Dataset`` with ``.train``, ``.val``, ``.test``
    lists of ``networkx.Graph``. See ``ddgjax.data.load_dataset``."""
    from ddgjax.data import load_dataset as _load_dataset

    return _load_dataset(name_or_path, **kwargs)


def __getattr__(name: str):
    # ``ddgjax.evaluate`` is the module ddgjax/evaluate.py, which is callable as
    # evaluate(graphs, reference, protocol="paper", ...) -> dict (see there): a
    # function of that name here would be replaced by the module once
    # ``python -m ddgjax.evaluate`` or ``ddgjax-evaluate`` imports it.
    if name in ("evaluate", "pretrained"):   # ddgjax.pretrained.names(): the shipped models
        import importlib

        return importlib.import_module(f"ddgjax.{name}")
    raise AttributeError(f"module 'ddgjax' has no attribute {name!r}")
