"""Datasets: a source string -> train / test / val lists of graphs, split as the paper does.

One entry point, :func:`load_dataset`, turns a *source* string into a
:class:`Dataset` of train / test / val lists of ``networkx.Graph`` (nodes
``0..n-1``, no self-loops; of the graph attributes only an optional class label
``g.graph["label"]`` and a dict of numeric properties ``g.graph["properties"]``):

==========================  ===================================================
source                      meaning
==========================  ===================================================
``NAME``                    a bundled dataset, NAME one of :data:`BUNDLED_NAMES`
                            (the paper's and SPECTRE's graph lists, shipped
                            in ``ddgjax/data/bundled/``; its README gives
                            their provenance and splits)
``path/to/file.json``       JSON graph-list file (``.json.gz`` too; see
                            :mod:`ddgjax.data.formats`)
``path/to/dir/``            a directory of edge-list files (``*.txt``,
                            ``*.edgelist``, ``*.edges``) or of GraphML files
                            (``*.graphml``), one graph per file
``path/to/g.graphml``       one GraphML graph (a one-graph dataset)
``path/to/g.edgelist``      one edge-list graph (``.txt``/``.edges`` too)
``path/to/list.pkl``        a pickled list of networkx graphs (``.pickle``
                            too); only with ``allow_pickle=True``
``planar_l`` ...            a large PolyGraph set (``planar_l``, ``sbm_l``,
                            ``lobster_l``): generated on first use and
                            cached (:mod:`ddgjax.data.large_sets`)
``builtin:NAME``            a seeded generator, NAME one of
                            :data:`ddgjax.data.generators.BUILTIN_NAMES`
``mix:NAME1,NAME2,...``     several of the above (no ``mix:`` among them; a
                            path containing a comma cannot be named), each
                            split as it alone would be, their train / test /
                            val lists concatenated in the order named; every
                            graph labelled with its component's NAME
                            (``g.graph["label"] = NAME``, replacing any label;
                            properties kept). E.g.
                            ``mix:planar_l,sbm_l,lobster_l`` or
                            ``mix:spectre_planar_64,spectre_sbm``
==========================  ===================================================

Splits (the provenance of each rule: ``docs/method.md``, "Datasets").
  * A JSON file's own ``split`` (``train``/``test`` and optionally ``val``
    index lists) is used when it has one; so is a pickled split dict.
  * Otherwise the paper's rule (EDP-GNN / GDSS / the seed code): no shuffling,
    test = the first ``int(0.2 * len)`` graphs of the file, train = the rest,
    no val. Directories are in lexicographic filename order (``g10`` sorts
    before ``g2``: zero-pad the numbers if the order matters).
  * Generated paper sets (``community_small``, ``sbm_27``, ``planar_60``) use
    the paper's rule on generation order; generated SPECTRE sets
    (``spectre_planar_64``, ``spectre_sbm``) use SPECTRE's 128/32/40 lengths
    (test = round(0.2 N), train = round(0.8 (N - test)), val = the rest) on a
    random permutation drawn from ``numpy.random.default_rng([seed, 1])``
    (a stream separate from the graphs'; *not* the torch permutation of the
    SPECTRE files, which only the JSON files reproduce).

A bundled name wins over a file or directory of the same name in the working
directory (write ``./planar_60`` for that one), so a config naming a bundled
dataset means the same graphs from any directory.

Every loaded graph passes through :func:`ddgjax.graphs.clean_graph`
(self-loops dropped with a warning, labels relabelled to ``0..n-1`` in sorted
order). Errors are :class:`~ddgjax.graphs.GraphFormatError` and name the file,
the graph index or line where relevant, and the problem.
"""
from __future__ import annotations

import os
import warnings
from typing import NamedTuple, Sequence

import networkx as nx
import numpy as np

from ddgjax.data import large_sets
from ddgjax.data.formats import (GraphListFile, file_splits, paper_split, read_graph_list,
                                 read_graphs)
from ddgjax.data.generators import builtin_spec, generate_graphs
from ddgjax.data.large_sets import LARGE_NAMES
from ddgjax.graphs import GraphFormatError, clean_graph

BUILTIN_PREFIX = "builtin:"
MIX_PREFIX = "mix:"
BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled")
# The graph lists shipped with the package (gzip-compressed JSON graph lists).
BUNDLED_NAMES = ("community_small", "ego_small", "sbm_27", "planar_60",
                 "spectre_comm20", "spectre_planar_64", "spectre_sbm")
# How each bundled benchmark is scored (docs/evaluation.md): (MMD protocol, validity rule or
# None). Any other source: the paper's protocol, no validity rule.
BENCHMARK_EVALUATION = {"planar_60": ("paper", "planar"),
                        "spectre_planar_64": ("spectre", "planar"),
                        "spectre_sbm": ("spectre", "sbm"),
                        "spectre_comm20": ("spectre_emd", None),
                        "planar_l": ("polygraph", "planar"),
                        "sbm_l": ("polygraph", "sbm"),
                        "lobster_l": ("polygraph", "lobster")}


def benchmark_evaluation(source: str) -> tuple[str, str | None]:
    """``(protocol, validity)`` with which the benchmark ``source`` (a config's
    ``data.source``) is scored: ``("spectre", "planar")`` for ``"spectre_planar_64"``,
    ``("paper", None)`` for a source that is no bundled benchmark."""
    return BENCHMARK_EVALUATION.get(source, ("paper", None))


def bundled_path(name: str) -> str:
    """Path of the bundled dataset ``name`` (one of :data:`BUNDLED_NAMES`)."""
    if name not in BUNDLED_NAMES:
        raise ValueError(f"unknown bundled dataset {name!r}; expected one of "
                         f"{', '.join(BUNDLED_NAMES)}")
    return os.path.join(BUNDLED_DIR, f"{name}.json.gz")


def source_path(source: str) -> str:
    """The file a source string reads: the bundled file for a bundled name, else
    the source itself with ``~`` expanded. Raises GraphFormatError if it does not
    exist (the message lists the bundled names)."""
    if source in BUNDLED_NAMES:
        return bundled_path(source)
    path = os.path.expanduser(source)
    if not os.path.exists(path):
        raise GraphFormatError(
            f"{source}: file or directory not found, and not a bundled dataset "
            f"({', '.join(BUNDLED_NAMES + LARGE_NAMES)}) or builtin:NAME")
    return path


def read_named_graph_list(source: str):
    """The JSON graph list a name or path stands for (``formats.GraphListFile``): a bundled
    dataset's file, a large set's cache (generated on first use), a ``mix:`` source (its
    concatenated splits, each graph labelled; ``split`` indexes train, val, test in that
    order), else the file itself."""
    if source.startswith(MIX_PREFIX):
        ds = load_dataset(source)
        graphs = [*ds.train, *ds.val, *ds.test]
        a, b = len(ds.train), len(ds.train) + len(ds.val)
        split = {"train": list(range(a)), "val": list(range(a, b)),
                 "test": list(range(b, len(graphs)))}
        return GraphListFile(graphs, split, source, source)
    if source in LARGE_NAMES:
        return large_sets.read_cached(source)
    return read_graph_list(bundled_path(source) if source in BUNDLED_NAMES else source)


class Dataset(NamedTuple):
    """A dataset split into lists of ``networkx.Graph`` (nodes ``0..n-1``).

    Attributes:
      name: dataset name (JSON ``name`` field, file/dir stem, or builtin NAME; for a
        ``mix:`` source the source string).
      train: training graphs.
      test: test graphs (the reference set of the metrics).
      val: validation graphs; empty where the dataset has none.
      source: the source string it was loaded from (path, ``builtin:NAME`` or
        ``mix:NAME1,...``).
      index: ``{"train", "test", "val"}`` -> the graphs' indices in the file (or in
        generation order), so that errors name a graph as the file numbers it. For a
        ``mix:`` source, indices into the concatenation of the components' graph lists
        (file or generation order each): component c's graph i is ``offset_c + i``, with
        ``offset_c`` the summed sizes (highest index + 1) of the components before it.
    """

    name: str
    train: list
    test: list
    val: list
    source: str
    index: dict | None = None


# ----------------------------------------------------------------------------
# splits: each maps a number of graphs N to {"train", "test", "val"} index lists


def spectre_split(num_graphs: int, seed: int) -> dict[str, list[int]]:
    """SPECTRE-style random split; 128/32/40 train/val/test for ``num_graphs=200``.

    Lengths: test = round(0.2 N), train = round(0.8 (N - test)), val = the rest.
    The permutation comes from ``numpy.random.default_rng([seed, 1])``; each
    index list is sorted ascending.
    """
    num_test = int(round(0.2 * num_graphs))
    num_train = int(round(0.8 * (num_graphs - num_test)))
    perm = np.random.default_rng([seed, 1]).permutation(num_graphs)
    train = sorted(perm[:num_train].tolist())
    val = sorted(perm[num_train:num_graphs - num_test].tolist())
    test = sorted(perm[num_graphs - num_test:].tolist())
    return {"train": train, "test": test, "val": val}


def _check_split(split: dict, num_graphs: int, where: str) -> dict[str, list[int]]:
    """Validate a carried split: needs train and test, no index in two parts."""
    missing = [k for k in ("train", "test") if k not in split]
    if missing:
        raise GraphFormatError(f"{where}: split lacks {missing}; it has {sorted(split)} "
                               "(remove 'split' to use the paper rule: first 20% test)")
    parts = {k: list(split.get(k, [])) for k in ("train", "test", "val")}
    for k, idx in parts.items():
        bad = [i for i in idx if not (isinstance(i, (int, np.integer)) and 0 <= i < num_graphs)]
        if bad:
            raise GraphFormatError(f"{where}: split '{k}' has indices outside 0..{num_graphs - 1}: "
                                   f"{bad[:5]}")
    for a, b in (("train", "test"), ("train", "val"), ("val", "test")):
        both = sorted(set(parts[a]) & set(parts[b]))
        if both:
            raise GraphFormatError(f"{where}: graphs {both[:5]} are in both split '{a}' and '{b}'")
    return parts


def _make_dataset(name: str, graphs: Sequence[nx.Graph], split: dict | None,
                  source: str, where: str) -> Dataset:
    """Clean every graph, check non-emptiness and apply ``split`` (paper rule if None)."""
    if not graphs:
        raise GraphFormatError(f"{where}: contains no graphs")
    graphs = [clean_graph(g, where, i) for i, g in enumerate(graphs)]
    for i, g in enumerate(graphs):
        if g.number_of_nodes() == 0:
            raise GraphFormatError(f"{where}: graph {i}: has no nodes")
    parts = file_splits(len(graphs), _check_split(split, len(graphs), where) if split else None)
    if not parts["train"]:
        raise GraphFormatError(f"{where}: the training split is empty ({len(graphs)} graphs)")
    if not parts["test"]:
        warnings.warn(f"{where}: the test split is empty ({len(graphs)} graphs; the paper rule "
                      "puts int(0.2 * N) graphs in test)", stacklevel=3)
    pick = lambda key: [graphs[i] for i in parts[key]]  # noqa: E731
    return Dataset(name=name, train=pick("train"), test=pick("test"), val=pick("val"),
                   source=source, index=parts)


def _load_builtin(name: str, source: str, seed: int, num_graphs: int | None) -> Dataset:
    """Generate builtin ``name`` and split it by its rule (paper or SPECTRE)."""
    spec = builtin_spec(name)
    graphs = generate_graphs(name, num_graphs, seed)
    split = paper_split(len(graphs)) if spec.split == "paper" else spectre_split(len(graphs), seed)
    return _make_dataset(name, graphs, split, source, source)


# ----------------------------------------------------------------------------
# mixtures of datasets


def mix_names(source: str) -> list[str]:
    """The component names of a ``mix:NAME1,NAME2,...`` source (whitespace around each
    stripped). Raises ValueError naming the source for an empty list or name, a name
    given twice, or a nested ``mix:``."""
    names = [n.strip() for n in source[len(MIX_PREFIX):].split(",")]
    if names == [""]:
        raise ValueError(f"{source}: names no datasets; expected mix:NAME1,NAME2,... (each "
                         "a bundled or large name, a path or builtin:NAME)")
    if "" in names:
        raise ValueError(f"{source}: an empty dataset name (a stray comma?)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{source}: names {', '.join(twice)} more than once")
    nested = [n for n in names if n.startswith(MIX_PREFIX)]
    if nested:
        raise ValueError(f"{source}: a mix cannot contain another mix ({nested[0]})")
    return names


def _check_component(name: str, source: str) -> None:
    """ValueError naming ``source`` for a component that is no dataset name or path."""
    if (name in BUNDLED_NAMES or name in LARGE_NAMES or name.startswith(BUILTIN_PREFIX)
            or os.path.exists(os.path.expanduser(name))):
        return
    raise ValueError(f"{source}: unknown dataset {name!r}: not a bundled or large dataset "
                     f"({', '.join(BUNDLED_NAMES + LARGE_NAMES)}), builtin:NAME, or an "
                     "existing file or directory")


def _index_size(ds: Dataset) -> int:
    """The length of the graph list a loaded dataset's ``index`` points into (highest
    index + 1)."""
    return max((max(v) + 1 for v in ds.index.values() if v), default=0)


def _load_mix(source: str, seed: int, allow_pickle: bool) -> Dataset:
    """Load each component of a ``mix:`` source, label its graphs with its name and
    concatenate the splits (see :class:`Dataset` for the ``index``)."""
    names = mix_names(source)
    for name in names:
        _check_component(name, source)
    parts = {"train": [], "test": [], "val": []}
    index = {"train": [], "test": [], "val": []}
    offset = 0
    for name in names:
        try:
            ds = load_dataset(name, seed=seed, allow_pickle=allow_pickle)
        except GraphFormatError as e:
            raise GraphFormatError(f"{source}: {e}") from e
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from e
        for key in parts:
            for g in getattr(ds, key):
                g.graph["label"] = name
            parts[key] += getattr(ds, key)
            index[key] += [offset + i for i in ds.index[key]]
        offset += _index_size(ds)
    return Dataset(name=source, source=source, index=index, **parts)


# ----------------------------------------------------------------------------
# the entry point


def load_dataset(source: str | os.PathLike, *, seed: int = 0, allow_pickle: bool = False,
                 num_graphs: int | None = None) -> Dataset:
    """Load a dataset from a path or generate a builtin one (see the module docstring).

    Args:
      source: a bundled dataset name (:data:`BUNDLED_NAMES`, e.g. ``"planar_60"``),
        a path (JSON file, GraphML file, edge-list file, directory of edge-list
        or GraphML files, pickle), ``"builtin:NAME"`` or ``"mix:NAME1,NAME2,..."``
        (each NAME one of the others; its graphs labelled NAME).
      seed: seeds builtin generators and the SPECTRE-style random split; files
        ignore it.
      allow_pickle: allow ``.pkl``/``.pickle`` files (they can run code).
      num_graphs: number of graphs a builtin generator makes (default: the
        dataset's size). Files always load whole; passing it with a path or a
        ``mix:`` source is a ValueError (slice the returned lists instead).

    Returns: a :class:`Dataset`.

    Raises:
      GraphFormatError: missing path, unknown format, malformed content, no
        graphs, empty training split.
      ValueError: unknown builtin name (the message lists the valid ones);
        ``num_graphs`` with a path or below 1; a ``mix:`` source with no names, an
        unknown name or a name given twice (the message names the source).
    """
    source = os.fspath(source)
    if source.startswith(BUILTIN_PREFIX):
        return _load_builtin(source[len(BUILTIN_PREFIX):], source, seed, num_graphs)
    if num_graphs is not None:
        raise ValueError(f"{source}: num_graphs applies only to builtin:NAME sources; "
                         "a file always loads whole")
    if source.startswith(MIX_PREFIX):
        return _load_mix(source, seed, allow_pickle)
    if source in LARGE_NAMES:
        f = read_named_graph_list(source)
        return _make_dataset(f.name, f.graphs, f.split, source, f.path)
    path = source_path(source)
    f = read_graphs(path, allow_pickle=allow_pickle)
    return _make_dataset(f.name, f.graphs, f.split or None, source, path)
