"""Graph data: file formats, seeded generators, datasets with their splits, node counts.

Where things are:

* :mod:`ddgjax.data.formats` -- reading and writing graph files: the JSON
  graph-list format (:func:`read_graph_list`, :func:`write_graph_list`),
  edge lists, GraphML, pickles, and :func:`~ddgjax.data.formats.read_graphs`,
  which picks the reader for a path.
* :mod:`ddgjax.data.generators` -- seeded random graphs (SBM, two-community,
  Delaunay planar) and the builtin datasets made from them
  (:func:`generate_graphs`, :data:`BUILTIN_NAMES`).
* :mod:`ddgjax.data.datasets` -- :func:`load_dataset`: a bundled name
  (:data:`BUNDLED_NAMES`), a path or ``builtin:NAME`` -> :class:`Dataset` of
  train / test / val graphs, split by the file's own split or the paper's /
  SPECTRE's rule.
* ``ddgjax/data/bundled/`` -- the paper's and SPECTRE's graph lists (gzip JSON)
  and a README with their provenance and splits.
* :mod:`ddgjax.data.node_counts` -- :func:`max_num_nodes` (for padding) and the
  empirical node-count distribution that sampling draws from.

Padded arrays of graphs (what the models see) are :mod:`ddgjax.graphs`.
"""
from ddgjax.data.datasets import (BUNDLED_NAMES, Dataset, benchmark_evaluation, bundled_path,
                                  load_dataset, paper_split, spectre_split)
from ddgjax.data.formats import (GraphListFile, graph_to_record, read_graph_list, read_graphs,
                                 select_split, write_graph_list)
from ddgjax.data.generators import BUILTIN_NAMES, generate_graphs
from ddgjax.data.node_counts import (NodeCountDistribution, max_num_nodes,
                                     node_count_distribution, sample_node_counts)

__all__ = [
    "BUILTIN_NAMES", "BUNDLED_NAMES", "Dataset", "benchmark_evaluation", "bundled_path", "GraphListFile", "NodeCountDistribution", "generate_graphs",
    "graph_to_record", "load_dataset", "max_num_nodes", "node_count_distribution",
    "paper_split", "read_graph_list", "read_graphs", "sample_node_counts", "select_split",
    "spectre_split", "write_graph_list",
]
