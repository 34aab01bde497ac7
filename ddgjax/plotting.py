"""Pictures of graphs: grids of sampled and training graphs, reverse chains."""
from __future__ import annotations

import os

import numpy as np

from ddgjax.graphs import batch_to_graphs


def draw_graph_grid(path: str, rows: list[tuple[str, list]], max_per_row: int = 8,
                    seed: int = 0) -> None:
    """Save a PNG grid: one row per (title, graphs) pair, spring layouts, isolated nodes shown.

    The file is written under a temporary name and renamed, so a crash never
    leaves a half-written picture.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    ncols = max(1, min(max_per_row, max(len(g) for _, g in rows)))
    fig, axes = plt.subplots(len(rows), ncols, figsize=(1.8 * ncols, 1.9 * len(rows)),
                             squeeze=False)
    for r, (title, graphs) in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            ax.set_axis_off()
            if c >= len(graphs):
                continue
            g = graphs[c]
            pos = nx.spring_layout(g, seed=seed) if g.number_of_nodes() else {}
            nx.draw_networkx(g, pos=pos, ax=ax, node_size=12, width=0.5, with_labels=False,
                             node_color="#3b6ea8", edge_color="#444444")
            ax.set_title(f"n={g.number_of_nodes()} m={g.number_of_edges()}", fontsize=6)
        axes[r][0].text(-0.05, 0.5, title, transform=axes[r][0].transAxes, rotation=90,
                        va="center", ha="right", fontsize=8)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def chain_rows(chain: np.ndarray, num_nodes: np.ndarray, num_levels: int = 8) -> list:
    """Rows for ``draw_graph_grid`` from reverse chains: ``num_levels`` evenly spaced states
    ``A_T ... A_0`` of each graph. chain: ``uint8[M, K+1, N, N]``; num_nodes: ``[M]``."""
    levels = np.unique(np.linspace(0, chain.shape[1] - 1, num_levels).round().astype(int))
    return [(f"graph {m}", batch_to_graphs(chain[m, levels], [num_nodes[m]] * len(levels)))
            for m in range(chain.shape[0])]
