"""Evaluate generated graphs against reference graphs: ``ddgjax.evaluate(...)`` in
Python, ``ddgjax-evaluate`` (or ``python -m ddgjax.evaluate``) on the command line,
which prints one JSON object.

Usage::

    ddgjax-evaluate --reference planar_60:test --generated samples.json --protocol paper
    ddgjax-evaluate --reference spectre_sbm:test --generated samples.json \\
        --protocol spectre --validity sbm --train spectre_sbm:train
    ddgjax-evaluate --reference my_graphs.json:test --generated samples.json
    ddgjax-evaluate --nll --workdir runs/planar --reference planar_60:test [--num_draws 8]

``PATH[:SPLIT]`` names a JSON graph-list file (or a bundled dataset, e.g.
``planar_60``) and optionally one of its splits (without it, all graphs of the
file). The output has ``degree``, ``clustering``, ``orbit``, ``avg`` (and
``spectral`` under ``spectre``); when a training set is known -- ``--train``,
or else the ``train`` split of the reference file when ``--reference`` names another
split -- also ``<stat>_floor`` (MMD of the training graphs against the reference) and
``<stat>_ratio``; with ``--validity``, ``valid``, ``unique``, ``novel`` and ``vun``.
Bad input prints ``error: ...`` on one line on stderr and exits with status 1.

With ``--nll`` it scores the reference graphs under the trained model in ``--workdir``
instead: the negative ELBO (an upper bound on the NLL) in bits per pair and per graph,
with Monte-Carlo standard errors, the levels it was computed on, and the Erdős–Rényi
baseline with the training split's edge density (``ddgjax.likelihood``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import types
import warnings


def evaluate(graphs, reference, protocol: str = "paper", train=None,
             validity: str | None = None) -> dict:
    """MMDs of generated ``graphs`` against ``reference`` (lists of ``networkx.Graph``).

    ``protocol``: ``"paper"`` (EMD/L2 kernels, isolated nodes of generated graphs
    dropped) or ``"spectre"`` (TV kernels plus a spectral MMD); ``train`` (the
    training graphs) adds the train/test floor and ratios to it; ``validity``
    (``"planar"`` or ``"sbm"``, needs ``train``) adds valid/unique/novel/V.U.N.
    fractions. Returns a flat dict: ``degree``, ``clustering``, ``orbit``
    [, ``spectral``], ``avg``, counts, and the extras above (see
    ``ddgjax.metrics.evaluate_generated``; ``docs/evaluation.md``).
    """
    from ddgjax.metrics import evaluate_generated

    return evaluate_generated(list(graphs), list(reference), protocol=protocol, train=train,
                              validity=validity)


def parse_graph_spec(spec: str) -> tuple[str, str | None]:
    """``"PATH[:SPLIT]"`` -> ``(path, split or None)``; ``PATH`` may be a ``mix:A,B`` source.

    The text after the last ``:`` is a split name unless the whole string names an
    existing file or that text contains a path separator; after a ``mix:`` source only
    ``train``, ``val`` or ``test`` is (a component may itself be ``builtin:NAME``).
    """
    from ddgjax.data.datasets import MIX_PREFIX

    if os.path.exists(spec):
        return spec, None
    if spec.startswith(MIX_PREFIX):
        body, _, split = spec.rpartition(":")
        return (body, split) if split in ("train", "val", "test") else (spec, None)
    path, sep, split = spec.rpartition(":")
    if sep and path and split and "/" not in split and os.sep not in split:
        return path, split
    return spec, None


def load_graphs(spec: str, what: str):
    """Graphs of ``PATH[:SPLIT]``, plus the file (for its other splits)."""
    from ddgjax.data import select_split
    from ddgjax.data.datasets import read_named_graph_list
    from ddgjax.graphs import GraphFormatError

    path, split = parse_graph_spec(spec)
    f = read_named_graph_list(path)
    graphs = select_split(f, split)
    if not graphs:
        where = f"split {split!r} of {path}" if split else path
        raise GraphFormatError(f"{what}: {where} holds no graphs")
    return graphs, f, split


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _finite(tree):
    """``tree`` (dicts, lists, numbers) with NaN and infinities as None (JSON's null):
    e.g. the standard error of one draw."""
    if isinstance(tree, dict):
        return {k: _finite(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_finite(v) for v in tree]
    return _clean(tree)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ddgjax-evaluate",
        description="MMDs (and validity, uniqueness, novelty, V.U.N.) of generated graphs.")
    p.add_argument("--reference", required=True, metavar="PATH[:SPLIT]",
                   help="reference graphs, e.g. planar_60:test (a bundled dataset), "
                        "my_graphs.json:test or mix:spectre_planar_64,spectre_sbm:test")
    p.add_argument("--generated", metavar="PATH[:SPLIT]",
                   help="generated graphs (JSON graph list); required unless --nll")
    p.add_argument("--protocol", choices=("paper", "spectre", "spectre_emd", "polygraph"),
                   default="paper",
                   help="paper: EMD/L2 kernels, generated graphs stripped of isolated nodes; "
                        "spectre: TV kernels plus spectral MMD, nothing stripped; "
                        "spectre_emd: the paper's EMD kernels plus spectral EMD, nothing "
                        "stripped (DiGress/GRAN on Community-20); polygraph: spectre plus "
                        "PolyGraph's RBF MMD of each statistic (rbf_*)")
    p.add_argument("--validity", choices=("planar", "sbm", "lobster"), default=None,
                   help="also report valid/unique/novel/vun with this validity test")
    p.add_argument("--train", default=None, metavar="PATH[:SPLIT]",
                   help="training graphs (floor and novelty; with --nll the edge density "
                        "of the ER baseline); default: the 'train' split of the reference "
                        "file")
    nll = p.add_argument_group("likelihood (--nll)")
    nll.add_argument("--nll", action="store_true",
                     help="score the reference graphs under the model in --workdir: negative "
                          "ELBO in bits per pair (an upper bound on the NLL)")
    nll.add_argument("--workdir", default=None, help="a workdir written by ddgjax-train")
    nll.add_argument("--checkpoint", choices=("best", "latest", "best_val"), default=None,
                     help="default: the run's config.sample.checkpoint")
    nll.add_argument("--ema", choices=("config", "true", "false"), default="config",
                     help="use EMA parameters (default: config.sample.use_ema)")
    nll.add_argument("--num_draws", type=int, default=8,
                     help="draws of A_t ~ q(A_t|A_0) per level and graph (>= 2 for a "
                          "standard error)")
    nll.add_argument("--num_levels", type=int, default=0,
                     help="levels of the bound (0: the model's T)")
    nll.add_argument("--grid", default=None,
                     help="trained | uniform | power:GAMMA (default: trained; uniform for "
                          "models trained in continuous time)")
    nll.add_argument("--algorithm", type=int, choices=(1, 2), default=1,
                     help="the reverse model whose bound it is (1: posterior marginalised "
                          "over p(A_0|A_t), the L_vb model; 2: re-noise a draw of A_0)")
    nll.add_argument("--seed", type=int, default=0)
    nll.add_argument("--batch_size", type=int, default=64)
    nll.add_argument("--per_graph", action="store_true",
                     help="also print every graph's bits per pair and standard error")
    return p


def run_nll(args, reference, train, train_source) -> dict:
    """The ``--nll`` result: ``ddgjax.likelihood.nll`` summarised as one flat JSON object."""
    import numpy as np

    from ddgjax.likelihood import density_bits_per_pair, edge_density, nll
    from ddgjax.sampling import load_run

    if not args.workdir:
        raise ValueError("--nll needs --workdir (a trained run)")
    use_ema = {"config": None, "true": True, "false": False}[args.ema]
    run = load_run(args.workdir, args.checkpoint, use_ema=use_ema)
    res = nll(run, reference, num_draws=args.num_draws, seed=args.seed,
              batch_size=args.batch_size, num_levels=args.num_levels or None, grid=args.grid,
              algorithm=args.algorithm)
    bpp, pairs = res["bits_per_pair"], res["num_pairs"]
    out = {"workdir": args.workdir, "checkpoint": run.checkpoint,
           "checkpoint_epoch": run.meta.get("epoch"), "reference": args.reference,
           "num_graphs": len(reference),
           "bits_per_pair": res["mean_bits_per_pair"],
           "se_bits_per_pair": res["se_mean_bits_per_pair"],
           "bits_per_pair_pooled": float(res["bits_per_graph"].sum() / pairs.sum()),
           "bits_per_graph": float(res["bits_per_graph"].mean()),
           "se_bits_per_graph": float(np.sqrt(np.sum(res["se_bits_per_graph"] ** 2))
                                      / len(reference)),
           "num_draws": res["num_draws"], "algorithm": res["algorithm"], "seed": res["seed"],
           "grid": res["levels"]["grid"], "num_levels": res["levels"]["num_levels"],
           "continuous_time": res["levels"]["continuous_time"], "estimator": res["estimator"]}
    if train:
        d = edge_density(train)
        out.update({"train": train_source, "train_density": d,
                    "er_density_bits_per_pair": float(density_bits_per_pair(reference, d).mean())})
    if args.per_graph:
        out["per_graph_bits_per_pair"] = [float(x) for x in bpp]
        out["per_graph_se_bits_per_pair"] = [float(x) for x in res["se_bits_per_pair"]]
    return out


def main(argv=None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not args.nll and not args.generated:
            parser.error("the following arguments are required: --generated (unless --nll)")
    except SystemExit as e:                       # usage errors: argparse printed them
        return int(e.code or 0)

    from ddgjax.data import select_split
    from ddgjax.graphs import GraphFormatError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # self-loop notices etc. would clutter stderr
            reference, ref_file, ref_split = load_graphs(args.reference, "--reference")
            generated = None if args.nll else load_graphs(args.generated, "--generated")[0]
            train, train_source = None, None
            if args.train:
                train, _, _ = load_graphs(args.train, "--train")
                train_source = args.train
            elif ref_split not in (None, "train"):
                train = select_split(ref_file, "train") or None
                train_source = train and f"{parse_graph_spec(args.reference)[0]}:train"
            if args.nll:
                print(json.dumps(_finite(run_nll(args, reference, train, train_source))))
                return 0
            if args.validity and train is None:
                raise ValueError("--validity needs training graphs for novelty: pass --train "
                                 "PATH[:SPLIT] (or a --reference file with a 'train' split)")
            from ddgjax.metrics import evaluate_generated   # JAX: only once input is good

            result = evaluate_generated(generated, reference, protocol=args.protocol,
                                        train=train, validity=args.validity)
    except (GraphFormatError, ValueError, OSError, _sampling_error()) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    out = {"protocol": args.protocol, "reference": args.reference,
           "generated": args.generated, "train": train_source}
    out.update(_finite(result))
    print(json.dumps(out, sort_keys=False))
    return 0


def _sampling_error():
    from ddgjax.sampling import SamplingError

    return SamplingError


def run() -> None:
    """Console-script entry point (``ddgjax-evaluate``)."""
    sys.exit(main())


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`evaluate`.

    ``ddgjax.evaluate`` is both the API function and (for ``python -m
    ddgjax.evaluate``) this module; importing the module replaces the package
    attribute, so the module itself must be callable the same way.
    """

    def __call__(self, graphs, reference, protocol: str = "paper", train=None,
                 validity: str | None = None) -> dict:
        return evaluate(graphs, reference, protocol=protocol, train=train, validity=validity)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    run()
