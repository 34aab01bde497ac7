"""Evaluate generated graphs against reference graphs: ``ddgjax.evaluate(...)`` in
Python, ``ddgjax-evaluate`` (or ``python -m ddgjax.evaluate``) on the command line,
which prints one JSON object.

Usage::

    ddgjax-evaluate --reference planar_60:test --generated samples.json --protocol paper
    ddgjax-evaluate --reference spectre_sbm:test --generated samples.json \\
        --protocol spectre --validity sbm --train spectre_sbm:train
    ddgjax-evaluate --reference my_graphs.json:test --generated samples.json

``PATH[:SPLIT]`` names a JSON graph-list file (or a bundled dataset, e.g.
``planar_60``) and optionally one of its splits (without it, all graphs of the
file). The output has ``degree``, ``clustering``, ``orbit``, ``avg`` (and
``spectral`` under ``spectre``); when a training set is known -- ``--train``,
or else the ``train`` split of the reference file when ``--reference`` names another
split -- also ``<stat>_floor`` (MMD of the training graphs against the reference) and
``<stat>_ratio``; with ``--validity``, ``valid``, ``unique``, ``novel`` and ``vun``.
Bad input prints ``error: ...`` on one line on stderr and exits with status 1.
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
    """``"PATH[:SPLIT]"`` -> ``(path, split or None)``.

    The text after the last ``:`` is a split name unless the whole string names an
    existing file or that text contains a path separator.
    """
    if os.path.exists(spec):
        return spec, None
    path, sep, split = spec.rpartition(":")
    if sep and path and split and "/" not in split and os.sep not in split:
        return path, split
    return spec, None


def load_graphs(spec: str, what: str):
    """Graphs of ``PATH[:SPLIT]``, plus the file (for its other splits)."""
    from ddgjax.data import read_graph_list, select_split
    from ddgjax.data.datasets import BUNDLED_NAMES, bundled_path
    from ddgjax.graphs import GraphFormatError

    path, split = parse_graph_spec(spec)
    f = read_graph_list(bundled_path(path) if path in BUNDLED_NAMES else path)
    graphs = select_split(f, split)
    if not graphs:
        where = f"split {split!r} of {path}" if split else path
        raise GraphFormatError(f"{what}: {where} holds no graphs")
    return graphs, f, split


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ddgjax-evaluate",
        description="MMDs (and validity, uniqueness, novelty, V.U.N.) of generated graphs.")
    p.add_argument("--reference", required=True, metavar="PATH[:SPLIT]",
                   help="reference graphs, e.g. planar_60:test (a bundled dataset) or "
                        "my_graphs.json:test")
    p.add_argument("--generated", required=True, metavar="PATH[:SPLIT]",
                   help="generated graphs (JSON graph list)")
    p.add_argument("--protocol", choices=("paper", "spectre"), default="paper",
                   help="paper: EMD/L2 kernels, generated graphs stripped of isolated nodes; "
                        "spectre: TV kernels plus spectral MMD, nothing stripped")
    p.add_argument("--validity", choices=("planar", "sbm"), default=None,
                   help="also report valid/unique/novel/vun with this validity test")
    p.add_argument("--train", default=None, metavar="PATH[:SPLIT]",
                   help="training graphs (floor and novelty); default: the 'train' split "
                        "of the reference file")
    return p


def main(argv=None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:                       # usage errors: argparse printed them
        return int(e.code or 0)

    from ddgjax.data import select_split
    from ddgjax.graphs import GraphFormatError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # self-loop notices etc. would clutter stderr
            reference, ref_file, ref_split = load_graphs(args.reference, "--reference")
            generated, _, _ = load_graphs(args.generated, "--generated")
            train, train_source = None, None
            if args.train:
                train, _, _ = load_graphs(args.train, "--train")
                train_source = args.train
            elif ref_split not in (None, "train") and ref_file.split.get("train"):
                train = select_split(ref_file, "train")
                train_source = f"{parse_graph_spec(args.reference)[0]}:train"
            if args.validity and train is None:
                raise ValueError("--validity needs training graphs for novelty: pass --train "
                                 "PATH[:SPLIT] (or a --reference file with a 'train' split)")
            from ddgjax.metrics import evaluate_generated   # JAX: only once input is good

            result = evaluate_generated(generated, reference, protocol=args.protocol,
                                        train=train, validity=args.validity)
    except (GraphFormatError, ValueError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    out = {"protocol": args.protocol, "reference": args.reference,
           "generated": args.generated, "train": train_source}
    out.update({k: _clean(v) for k, v in result.items()})
    print(json.dumps(out, sort_keys=False))
    return 0


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
