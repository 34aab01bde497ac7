"""Batched sampling driver (host side): load a trained run, draw node counts,
sample in fixed-shape batches, convert to graphs.

Graph ``i`` of a request uses the key ``fold_in(key(seed), i)`` and a per-graph
(vmapped) sampler, so the graphs do not depend on the batch size or on the
number of devices: ``batch_size=64`` and ``batch_size=1024`` give the same
samples. The sampler comes from the run's noise process
(``ddgjax.processes``); this module never names one.
"""
from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from ddgjax import checkpoints
from ddgjax.data import NodeCountDistribution, sample_node_counts
from ddgjax.graphs import batch_to_graphs, node_mask_from_counts
from ddgjax.models import abstract_params, model_from_config
from ddgjax.parallel import batch_sharded, make_mesh, put_global, replicate
from ddgjax.processes import NoiseProcess, Sampler, process_from_config
from ddgjax.workdir import WorkdirError, read_run_record


class SamplingError(RuntimeError):
    """Bad sampling request (empty workdir, impossible options, ...)."""


class Run(NamedTuple):
    """A trained run loaded from its workdir.

    Attributes:
      config: the run's configuration; model: the Flax denoiser;
      process: its noise process; params: the parameters sampling uses (EMA or raw);
      max_nodes: N; node_counts: the training split's node-count distribution;
      meta: the checkpoint's meta (epoch, step, loss).
    """

    config: ml_collections.ConfigDict
    model: Any
    process: NoiseProcess
    params: Any
    max_nodes: int
    node_counts: NodeCountDistribution
    meta: dict


def sampling_config(config: ml_collections.ConfigDict, compute_dtype: str | None = None,
                    pallas: bool | None = None) -> ml_collections.ConfigDict:
    """``config`` with the model's arithmetic changed for sampling (the parameters stay
    as trained): ``compute_dtype`` "float32"/"bfloat16" and, for PPGN, ``pallas`` (its
    Pallas kernels, used in bfloat16). None keeps the run's setting."""
    if compute_dtype is None and pallas is None:
        return config
    config = ml_collections.ConfigDict(config.to_dict())
    if compute_dtype is not None:
        config.model.compute_dtype = compute_dtype
    if pallas is not None:
        if config.model.name != "ppgn":
            raise SamplingError(f"pallas kernels exist for the PPGN only; this run's model is "
                                f"{config.model.name!r}")
        config.model.ppgn.pallas = bool(pallas)
    return config


def load_run(workdir: str, checkpoint: str = "best", use_ema: bool | None = None,
             compute_dtype: str | None = None, pallas: bool | None = None) -> Run:
    """Load config, dataset record and the parameters of the ``best`` (or ``latest``)
    checkpoint of a run. ``use_ema=None`` follows ``config.sample.use_ema``;
    ``compute_dtype`` and ``pallas`` change how the model computes (``sampling_config``),
    e.g. ``compute_dtype="bfloat16", pallas=True`` for the fastest sampler."""
    try:
        config, ds_info = read_run_record(workdir)
        config = sampling_config(config, compute_dtype, pallas)
        model = model_from_config(config)
        process = process_from_config(config)
        params, ema_params, meta = checkpoints.restore_params(
            workdir, checkpoint, abstract_params(model, int(ds_info["max_nodes"])))
    except checkpoints.UnreadableCheckpointError as e:
        raise SamplingError(f"{e}; checkpoints in {workdir}: "
                            f"{checkpoints.describe_available(workdir)} (pick one with "
                            "--checkpoint)") from e
    except (WorkdirError, checkpoints.CheckpointError, ValueError) as e:
        raise SamplingError(str(e)) from e
    if use_ema is None:
        use_ema = bool(config.sample.get("use_ema", False))
    return Run(config, model, process, ema_params if use_ema else params,
               int(ds_info["max_nodes"]), NodeCountDistribution.from_dict(ds_info["node_counts"]),
               meta)


_COMPILED: dict = {}


def compiled_sampler(model, sampler: Sampler):
    """Jitted ``(params, keys [B], node_mask [B, N]) -> sampler(model.apply(params), ...)``.

    One compiled function per (model, sampler) pair (both hashable), so repeated
    ``generate`` calls (several seeds, several checkpoints of one model) compile
    once per batch shape.
    """
    key = (model, sampler)
    if key not in _COMPILED:
        def run(params, keys, node_mask):
            denoise = lambda a, m, t, s: model.apply(params, a, m, t, s)
            return sampler(denoise, keys, node_mask)

        _COMPILED[key] = jax.jit(run)
    return _COMPILED[key]


def graph_keys(seed: int, first: int, count: int) -> jax.Array:
    """``[count]`` keys ``fold_in(key(seed), i)`` for request indices ``first .. first+count-1``."""
    root = jax.random.key(seed)
    idx = jnp.arange(first, first + count, dtype=jnp.int32)
    return jax.vmap(lambda i: jax.random.fold_in(root, i))(idx)


def generate(run: Run, num_samples: int, seed: int = 0, batch_size: int = 1024,
             num_steps: int | None = None, node_counts: np.ndarray | None = None,
             return_chain: bool = False, progress=None, timing: bool = True,
             devices=None, **sampler_options) -> dict:
    """Sample ``num_samples`` graphs.

    Node counts come from the training split's distribution (seeded by
    ``seed``) unless given. Batches all have ``batch_size`` graphs (the last is
    padded with empty graphs) so the sampler compiles once. ``sampler_options``
    go to the process's sampler (bit flips: ``algorithm=1|2``; Gaussian:
    ``eta``, ``clip_x0``); ``None`` values mean the run's default. With ``timing`` a
    request that fits one batch is sampled a second time, compiled, to time it.
    ``devices`` (default: all) are the devices the batch is split over.

    Returns a dict with ``adj`` (``uint8[M, N, N]``), ``num_nodes`` (``[M]``),
    ``graphs`` (networkx), ``seconds`` (sampling time without the first
    compile), ``compile_seconds``, ``graphs_per_second``, the sampler's ``info``
    (as ``sampler`` and merged in: ``num_steps``, and e.g. ``algorithm``), and ``chain``
    (``[M, K+1, N, N]``) if asked. ``progress(done, total)`` is called with
    ``done=0`` before the first batch (which compiles) and after every batch.
    """
    if num_samples < 1:
        raise SamplingError(f"--num_samples must be positive, got {num_samples}")
    if batch_size < 1:
        raise SamplingError(f"--batch_size (config.sample.batch_size) must be positive, "
                            f"got {batch_size}")
    if num_steps is not None and num_steps < 0:
        raise SamplingError(f"--num_steps (config.sample.num_steps) must be >= 0, got {num_steps}")
    options = {k: v for k, v in sampler_options.items() if v is not None}
    try:
        sampler = run.process.sampler(num_steps or None, return_chain, **options)
    except ValueError as e:
        raise SamplingError(str(e)) from e
    if node_counts is None:
        node_counts = sample_node_counts(run.node_counts, num_samples, seed)
    node_counts = np.asarray(node_counts, dtype=np.int32)
    if node_counts.max(initial=0) > run.max_nodes:
        raise SamplingError(f"requested {node_counts.max()} nodes; this model was trained with "
                            f"max_nodes={run.max_nodes}")
    mesh = make_mesh(devices)
    n_dev = mesh.devices.size
    batch_size = max(n_dev, int(math.ceil(min(batch_size, num_samples) / n_dev) * n_dev))
    sharding = batch_sharded(mesh)
    fn = compiled_sampler(run.model, sampler)
    params = replicate(run.params, mesh)
    out_adj, out_chain = [], []
    t_compile, t_run = 0.0, 0.0
    num_batches = math.ceil(num_samples / batch_size)
    if progress is not None:
        progress(0, num_samples)
    for b in range(num_batches):
        lo = b * batch_size
        counts = np.zeros(batch_size, np.int32)
        real = node_counts[lo:lo + batch_size]
        counts[:len(real)] = real
        keys = jax.device_put(graph_keys(seed, lo, batch_size), sharding)
        mask = put_global(node_mask_from_counts(counts, run.max_nodes), sharding)
        t0 = time.time()
        res = jax.block_until_ready(fn(params, keys, mask))
        dt = time.time() - t0
        if b == 0:
            t_compile = dt
            if num_batches == 1 and timing:  # time a second, compiled call for graphs/s
                t0 = time.time()
                jax.block_until_ready(fn(params, keys, mask))
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
              "algorithm": sampler.info.get("algorithm"), **sampler.info,
              "sampler": sampler.info}
    if return_chain:
        result["chain"] = np.concatenate(out_chain)
    return result
