"""Batched sampling driver (host side): load a run, draw node counts, sample in
fixed-shape batches, convert to graphs, draw pictures.

Graph ``i`` of a request uses the key ``fold_in(key(seed), i)`` and the
per-graph (vmapped) sampler, so the graphs do not depend on the batch size or
on the number of devices: ``--batch_size 64`` and ``--batch_size 1024`` give
the same samples.
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from ddgjax import checkpoints, diffusion
from ddgjax.datasets import NodeCountDistribution, sample_node_counts
from ddgjax.graphs import batch_to_graphs, node_mask_from_counts
from ddgjax.schedules import NoiseSchedule
from ddgjax.training import (AXIS, init_state, make_mesh, make_optimizer, model_from_config,
                             schedule_from_config)


class SamplingError(RuntimeError):
    """Bad sampling request (empty workdir, impossible options, ...)."""


class Run(NamedTuple):
    """A trained run loaded from its workdir."""

    config: ml_collections.ConfigDict
    model: Any
    schedule: NoiseSchedule
    params: Any
    max_nodes: int
    node_counts: NodeCountDistribution
    meta: dict


def load_run(workdir: str, checkpoint: str = "best", use_ema: bool | None = None) -> Run:
    """Load config, dataset info and the ``best`` (or ``latest``) checkpoint of a run."""
    cfg_path = os.path.join(workdir, "config.json")
    ds_path = os.path.join(workdir, "dataset.json")
    if not os.path.isdir(workdir):
        raise SamplingError(f"{workdir}: workdir not found")
    for p in (cfg_path, ds_path):
        if not os.path.exists(p):
            raise SamplingError(f"{workdir}: no trained run here ({os.path.basename(p)} is "
                                "missing); run train.py --workdir on it first")
    with open(cfg_path) as f:
        config = ml_collections.ConfigDict(json.load(f))
    with open(ds_path) as f:
        ds_info = json.load(f)
    model = model_from_config(config)
    schedule = schedule_from_config(config)
    tx = make_optimizer(config.train, 1)
    target = init_state(model, tx, jax.random.key(0), ds_info["max_nodes"])
    try:
        state, meta = checkpoints.restore(workdir, checkpoint, target)
    except checkpoints.CheckpointError as e:
        raise SamplingError(str(e)) from e
    if use_ema is None:
        use_ema = bool(config.sample.get("use_ema", False))
    params = state.ema_params if use_ema else state.params
    return Run(config, model, schedule, params, int(ds_info["max_nodes"]),
               NodeCountDistribution.from_dict(ds_info["node_counts"]), meta)


def default_algorithm(config) -> int:
    """Algorithm 1 for L_vb, Algorithm 2 for L_simple (the paper's pairing), unless set."""
    if config.sample.algorithm:
        return int(config.sample.algorithm)
    return 1 if config.diffusion.loss == "vb" else 2


_SAMPLERS: dict = {}


def cached_sampler(model, cache_key: tuple, sample_fn):
    """Jitted ``(params, keys [B], node_mask [B,N]) -> sample_fn(denoise, keys, node_mask)``.

    One compiled sampler per (model, ``cache_key``), so repeated ``generate``
    calls (several seeds, several checkpoints of one model) compile once.
    ``cache_key`` must name everything ``sample_fn`` closes over.
    """
    full_key = (model, cache_key)
    if full_key not in _SAMPLERS:
        def run(params, keys, node_mask):
            return sample_fn(lambda a, m, t, b: model.apply(params, a, m, t, b), keys, node_mask)

        _SAMPLERS[full_key] = jax.jit(run)
    return _SAMPLERS[full_key]


def make_sampler(model, schedule: NoiseSchedule, algorithm: int, num_steps: int | None,
                 return_chain: bool = False):
    """Jitted discrete sampler ``(params, keys [B], node_mask [B,N]) -> adj [B,N,N]``,
    vmapped per graph (``diffusion.sample_graphs_vmapped``), cached."""
    cache_key = ("discrete", schedule.num_timesteps, schedule.beta_bar64.tobytes(), algorithm,
                 num_steps, return_chain)
    return cached_sampler(model, cache_key, lambda fn, keys, node_mask:
                          diffusion.sample_graphs_vmapped(fn, keys, node_mask, schedule,
                                                          algorithm, num_steps, return_chain))


def generate(run: Run, num_samples: int, seed: int = 0, batch_size: int = 1024,
             algorithm: int | None = None, num_steps: int | None = None,
             node_counts: np.ndarray | None = None, return_chain: bool = False,
             progress=None) -> dict:
    """Sample ``num_samples`` graphs.

    Node counts come from the training split's distribution (seeded by
    ``seed``) unless given. Batches all have ``batch_size`` graphs (the last is
    padded with empty graphs) so the sampler compiles once.

    Returns a dict with ``adj`` (``uint8[M, N, N]``), ``num_nodes`` (``[M]``),
    ``graphs`` (networkx), ``seconds`` (sampling time without the first
    compile), ``compile_seconds``, and ``chain`` (``[M, K+1, N, N]``) if asked.
    """
    if num_samples < 1:
        raise SamplingError(f"--num_samples must be positive, got {num_samples}")
    algorithm = algorithm or default_algorithm(run.config)
    num_steps = num_steps or None
    if node_counts is None:
        node_counts = sample_node_counts(run.node_counts, num_samples, seed)
    node_counts = np.asarray(node_counts, dtype=np.int32)
    if node_counts.max(initial=0) > run.max_nodes:
        raise SamplingError(f"requested {node_counts.max()} nodes; this model was trained with "
                            f"max_nodes={run.max_nodes}")
    mesh = make_mesh()
    n_dev = mesh.devices.size
    batch_size = max(n_dev, int(math.ceil(min(batch_size, num_samples) / n_dev) * n_dev))
    sharding = NamedSharding(mesh, P(AXIS))
    if run.config.diffusion.get("kind", "discrete") == "gaussian":
        from ddgjax import gaussian

        algorithm = None  # the Gaussian sampler has one reverse process (docs/gaussian.md)
        sampler = gaussian.make_sampler(run.model, run.config, num_steps, return_chain)
    else:
        sampler = make_sampler(run.model, run.schedule, algorithm, num_steps, return_chain)
    params = jax.device_put(run.params, NamedSharding(mesh, P()))
    root = jax.random.key(seed)
    out_adj, out_chain = [], []
    t_compile, t_run = 0.0, 0.0
    num_batches = math.ceil(num_samples / batch_size)
    for b in range(num_batches):
        lo = b * batch_size
        counts = np.zeros(batch_size, np.int32)
        real = node_counts[lo:lo + batch_size]
        counts[:len(real)] = real
        idx = np.arange(lo, lo + batch_size, dtype=np.int32)
        keys = jax.vmap(lambda i: jax.random.fold_in(root, i))(jnp.asarray(idx))
        mask = node_mask_from_counts(counts, run.max_nodes)
        keys, mask = jax.device_put(keys, sharding), jax.device_put(mask, sharding)
        t0 = time.time()
        res = sampler(params, keys, mask)
        res = jax.block_until_ready(res)
        dt = time.time() - t0
        if b == 0:
            t_compile = dt
            if num_batches == 1:  # time a second, compiled call for graphs/s
                t0 = time.time()
                jax.block_until_ready(sampler(params, keys, mask))
                t_run += time.time() - t0
        else:
            t_run += dt
        adj = res[0] if return_chain else res
        out_adj.append(np.asarray(adj, dtype=np.uint8)[:len(real)])
        if return_chain:
            out_chain.append(np.asarray(res[1], dtype=np.uint8)[:len(real)])
        if progress is not None:
            progress(min(lo + batch_size, num_samples), num_samples)
    timed = num_samples if num_batches == 1 else num_samples - min(batch_size, num_samples)
    adj = np.concatenate(out_adj)
    result = {"adj": adj, "num_nodes": node_counts, "graphs": batch_to_graphs(adj, node_counts),
              "seconds": t_run, "compile_seconds": t_compile,
              "graphs_per_second": (timed / t_run) if t_run > 0 else float("nan"),
              "algorithm": algorithm,
              "num_steps": int(num_steps or run.schedule.num_timesteps)}
    if return_chain:
        result["chain"] = np.concatenate(out_chain)
    return result


def draw_graph_grid(path: str, rows: list[tuple[str, list]], max_per_row: int = 8,
                    seed: int = 0) -> None:
    """Save a PNG grid: one row per (title, graphs) pair, spring layouts, isolated nodes shown."""
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
