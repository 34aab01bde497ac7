"""Shared test helpers: paths, the data-dependent marker, random padded batches and graphs."""
from __future__ import annotations

import os
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from ddgjax.graphs import node_mask_from_counts, pair_mask

REPO = Path(__file__).resolve().parents[1]
# The source of the graph lists (../shared/data beside the repository, or $DDGJAX_DATA).
SHARED_DIR = Path(os.environ.get("DDGJAX_DATA", REPO.parent / "shared" / "data"))


def bundled_copy() -> Path:
    """The package's bundled graph lists (``ddgjax/data/bundled/*.json.gz``, checked
    byte-identical to the source where it exists) decompressed into a per-process
    temporary directory, for tests that read ``DATA_DIR / "<name>.json"``."""
    import atexit
    import gzip
    import shutil
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="ddgjax-bundled-"))
    atexit.register(shutil.rmtree, out, True)
    for gz in (REPO / "ddgjax" / "data" / "bundled").glob("*.json.gz"):
        with gzip.open(gz, "rb") as src, open(out / gz.name[:-3], "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


# Where the tests read graph lists: the source where it exists (this checkout's machine),
# else the bundled copies (a clean clone, CI), so the data tests run everywhere.
DATA_DIR = SHARED_DIR if SHARED_DIR.is_dir() else bundled_copy()
needs_data = pytest.mark.skipif(not DATA_DIR.is_dir(),
                                reason=f"dataset directory {DATA_DIR} not found")
needs_shared = pytest.mark.skipif(not SHARED_DIR.is_dir(),
                                  reason=f"source directory {SHARED_DIR} not found")


def random_batch(seed: int, counts, max_nodes: int, p: float = 0.4):
    """A random padded batch following the GraphBatch convention, as numpy arrays.

    Returns ``(adj float32[B, N, N], node_mask bool[B, N])``: each real strict-upper
    pair is an edge with probability ``p``, mirrored; zero diagonal and padding.
    """
    rng = np.random.default_rng(seed)
    counts = np.asarray(counts)
    mask = node_mask_from_counts(counts, max_nodes)
    u = np.triu(rng.random((len(counts), max_nodes, max_nodes)) < p, 1) & pair_mask(mask)
    return (u | np.swapaxes(u, 1, 2)).astype(np.float32), mask


def data_file(name: str) -> Path:
    """``DATA_DIR / name``; skips the calling test when that file is missing."""
    path = DATA_DIR / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def same_graph(g, h) -> bool:
    """Label-exact equality of two networkx graphs (same nodes, same undirected edges)."""
    return set(g.nodes) == set(h.nodes) and {frozenset(e) for e in g.edges} == {
        frozenset(e) for e in h.edges}


def random_graphs(num: int, seed: int = 0) -> list:
    """``num`` G(n, 0.5) graphs with n in 3..11 nodes, each with at least one edge."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(num):
        n = int(rng.integers(3, 12))
        g = nx.gnp_random_graph(n, 0.5, seed=int(rng.integers(1 << 30)))
        if g.number_of_edges() == 0:
            g.add_edge(0, 1)
        out.append(g)
    return out


def planted_sbm(sizes, p_intra: float = 0.3, p_inter: float = 0.005, seed: int = 0):
    """A stochastic-block-model graph with blocks of ``sizes`` and its true labels.

    Returns ``(g, truth)``: ``g`` with nodes ``0..n-1``, ``truth`` ``int[n]`` the
    block of each node.
    """
    k = len(sizes)
    probs = np.full((k, k), p_inter)
    np.fill_diagonal(probs, p_intra)
    g = nx.stochastic_block_model(list(sizes), probs.tolist(), seed=seed)
    truth = np.array([g.nodes[v]["block"] for v in g.nodes])
    return nx.convert_node_labels_to_integers(g), truth


def tree_digest(path: Path) -> dict:
    """Relative path -> bytes of every file under ``path`` (what a fault must not change)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def the_error_line(capsys) -> str:
    """The single ``error:`` line on stderr (and no traceback)."""
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """The commands make SIGTERM raise KeyboardInterrupt; give the test process its own
    back (autouse in the modules that import it)."""
    import signal

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
