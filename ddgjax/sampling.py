"""Batched sampling driver (host side): load a trained run, draw node counts,
sample in fixed-shape batches, convert to graphs.

Graph ``i`` of a request uses the key ``fold_in(key(seed), i)`` and a per-graph
(vmapped) sampler, so the graphs do not depend on the batch size or on the
number of devices: ``batch_size=64`` and ``batch_size=1024`` give the same
samples in float32. Under ``compute_dtype="bfloat16"`` another batch shape can change
how XLA rounds, and a few pairs whose probability lies near their uniform draw come out
otherwise (on the CPU, 5 of 12 SPECTRE SBM graphs of 115-168 nodes differed by 1-29 of
~750 edges between batches of 12 and 3; the graphs of 44-117 nodes did not): the same
distribution, other draws. The sampler comes from the run's noise process
(``ddgjax.processes``); this module never names one.

A run trained with size buckets (``config.data.buckets``) samples in the same
buckets: the requested graphs are grouped by the smallest bucket that holds their
node count, each group is sampled in fixed-shape batches padded to its bucket's
size (one compile per bucket shape), and the graphs come back in request order,
padded to ``max_nodes``. Graph ``i`` still uses the key of request index ``i``, so
the graphs do not depend on the batch size; they do depend on the bucket sizes
(a graph padded to another size draws other noise).
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ddgjax import checkpoints
from ddgjax.conditioning import (ConditionError, Conditions, condition_denoiser, encode,
                                 record_dim, request_node_counts)
from ddgjax.buckets import run_bucket_sizes, sampling_groups
from ddgjax.data import NodeCountDistribution, sample_node_counts
from ddgjax.graphs import batch_to_graphs, node_mask_from_counts
from ddgjax.models import abstract_params, model_from_config
from ddgjax.models.ppgn import KERNELS
from ddgjax.parallel import AXIS, batch_sharded, make_mesh, put_global, replicate
from ddgjax.configuration import CHECKPOINTS, pad_multiple_problem
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
      meta: the checkpoint's meta (epoch, step, loss); dataset: the run's record of its
      data (``dataset.json``: source, path, digests, split sizes; ``input_pipeline``);
      checkpoint: which checkpoint was loaded (``"best"``, ``"latest"`` or ``"best_val"``);
      workdir: where the run was loaded from.
    """

    config: ml_collections.ConfigDict
    model: Any
    process: NoiseProcess
    params: Any
    max_nodes: int
    node_counts: NodeCountDistribution
    meta: dict
    dataset: dict | None = None
    checkpoint: str | None = None
    workdir: str | None = None

    @property
    def conditions(self) -> Conditions | None:
        """How the run encodes labels (``ddgjax.conditioning``), None if unconditional."""
        record = (self.dataset or {}).get("conditions")
        return None if record is None else Conditions.from_dict(record)


def sampling_config(config: ml_collections.ConfigDict, compute_dtype: str | None = None,
                    kernels: str | None = None,
                    pad_multiple: int | None = None) -> ml_collections.ConfigDict:
    """``config`` with the model's arithmetic changed for sampling (the parameters stay
    as trained): ``compute_dtype`` "float32"/"bfloat16" and, for PPGN, ``kernels``
    (``config.model.ppgn.kernels``: "xla", or "pallas" for its Pallas kernels, used in
    bfloat16 on a GPU) and ``pad_multiple`` (the node count the PPGN pads its inputs to
    inside the call, ``config.model.ppgn.pad_multiple``: the same function, faster where
    the kernels tile the padded count better, e.g. SPECTRE SBM's 187 nodes on 192). None
    keeps the run's setting. SamplingError naming the argument for a value it cannot use."""
    if compute_dtype is None and kernels is None and pad_multiple is None:
        return config
    if kernels is not None and kernels not in KERNELS:
        raise SamplingError(f"kernels: expected one of {KERNELS}, got {kernels!r}")
    if pad_multiple is not None:
        problem = pad_multiple_problem(pad_multiple, config.model.name)
        if problem:
            raise SamplingError(f"pad_multiple: {problem}")
    config = ml_collections.ConfigDict(config.to_dict())
    if compute_dtype is not None:
        config.model.compute_dtype = compute_dtype
    if kernels is not None:
        if kernels == "pallas" and config.model.name != "ppgn":
            raise SamplingError(f"kernels: the Pallas kernels exist for the PPGN only; this "
                                f"run's model is {config.model.name!r}")
        if config.model.name == "ppgn":
            config.model.ppgn.kernels = kernels
    if pad_multiple is not None and config.model.name == "ppgn":
        config.model.ppgn.pad_multiple = int(pad_multiple)
    return config


def configured_checkpoint(config, checkpoint: str | None = None) -> str:
    """The checkpoint a command loads: ``checkpoint`` when given, else the run's
    ``config.sample.checkpoint`` (a run recorded without it: ``"best"``). SamplingError
    naming the field for a name that is not one of ``CHECKPOINTS``."""
    if checkpoint is not None:
        field, name = "checkpoint", checkpoint
    else:
        field, name = "config.sample.checkpoint", config.sample.get("checkpoint", "best")
    if name not in CHECKPOINTS:
        raise SamplingError(f"{field}: expected one of {CHECKPOINTS}, got {name!r}")
    return name


def load_run(workdir: str, checkpoint: str | None = None, use_ema: bool | None = None,
             compute_dtype: str | None = None, kernels: str | None = None,
             pad_multiple: int | None = None) -> Run:
    """Load config, dataset record and the parameters of a checkpoint of a run:
    ``checkpoint`` ``"best"`` (lowest training loss), ``"latest"`` or ``"best_val"`` (best
    samples on held-out graphs); None: the run's ``config.sample.checkpoint``
    (``configured_checkpoint``). ``use_ema=None`` follows ``config.sample.use_ema``;
    ``compute_dtype``, ``kernels`` and ``pad_multiple`` change how the model computes
    (``sampling_config``), e.g. ``compute_dtype="bfloat16", kernels="pallas"`` for the
    fastest sampler on a GPU."""
    try:
        config, ds_info = read_run_record(workdir)
        checkpoint = configured_checkpoint(config, checkpoint)
        config = sampling_config(config, compute_dtype, kernels, pad_multiple)
        model = model_from_config(config, cond_dim=record_dim(ds_info))
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
               meta, ds_info, checkpoint, workdir)


_COMPILED: dict = {}


def compiled_sampler(model, sampler: Sampler, mesh: Mesh | None = None,
                     guided: bool = False):
    """Jitted ``(params, keys [B], node_mask [B, N], cond=None, guidance=0.0) ->
    sampler(model.apply(params), ...)``; ``cond [B, D]`` the graphs' conditions for a
    conditional model and, where ``guided``, ``guidance`` the weight of classifier-free
    guidance (``ddgjax.conditioning``; a traced scalar: one program serves every weight).

    One compiled function per (model, sampler, mesh), so repeated ``generate`` calls
    (several seeds, several checkpoints of one model) compile once per batch shape. The
    model (a frozen Flax module) holds every setting that changes its program, its kernel
    settings included, so a model that computes otherwise compiles anew.

    With a ``mesh`` of several devices the sampler runs on each device's slice of the batch
    (``jax.shard_map`` over ``AXIS``; keys and masks split over it, parameters replicated).
    Every graph's draws depend only on its own key, so the samples are those of the whole
    batch in one place; and kernels XLA cannot partition (the PPGN's Pallas kernels) see
    their device's graphs only. Under a plain ``jit`` with sharded inputs XLA treats such a
    custom call as unpartitionable and replicates its operands (reported for Pallas/Triton
    kernels in jax-ml/jax-triton#163; not measured in ddgjax).
    """
    several = mesh is not None and mesh.devices.size > 1
    key = (model, sampler, mesh if several else None, bool(guided))
    if key not in _COMPILED:
        def body(params, keys, node_mask, cond, guidance):
            apply = lambda a, m, t, s, *c: model.apply(params, a, m, t, s, *c)
            w = guidance if guided else 0.0
            return sampler(condition_denoiser(apply, cond, w), keys, node_mask)

        if several:
            body = jax.shard_map(body, mesh=mesh,
                                 in_specs=(P(), P(AXIS), P(AXIS), P(AXIS), P()),
                                 out_specs=P(AXIS), check_vma=False)
        _COMPILED[key] = jax.jit(lambda params, keys, node_mask, cond=None, guidance=0.0:
                                 body(params, keys, node_mask, cond,
                                      jnp.asarray(guidance, jnp.float32)))
    return _COMPILED[key]


def _batch_mesh(keys: jax.Array) -> Mesh | None:
    """The mesh ``keys`` are split over along ``AXIS`` (``generate``'s layout), else None."""
    sharding = getattr(keys, "sharding", None)
    if isinstance(sharding, NamedSharding) and tuple(sharding.spec) == (AXIS,):
        return sharding.mesh
    return None


_EXECUTABLES: dict = {}


def sampler_executable(model, sampler: Sampler, params, keys: jax.Array,
                       node_mask: jax.Array, cond=None,
                       guidance: float = 0.0) -> tuple[Any, float]:
    """``(executable, compile_seconds)``: :func:`compiled_sampler` compiled ahead of time
    for these arguments' shapes and shardings, once per process (``compile_seconds`` is
    0 when it was compiled before). Lets ``generate`` time compiling and sampling apart
    in one sampling pass."""
    guided = bool(guidance)
    leaves, tree = jax.tree_util.tree_flatten((params, keys, node_mask, cond))
    sig = (model, sampler, tree, tuple((a.shape, a.dtype, a.sharding) for a in leaves),
           guided)
    if sig in _EXECUTABLES:
        return _EXECUTABLES[sig], 0.0
    t0 = time.time()
    exe = compiled_sampler(model, sampler, _batch_mesh(keys), guided).lower(
        params, keys, node_mask, cond, guidance).compile()
    _EXECUTABLES[sig] = exe
    return exe, time.time() - t0


def clear_compiled() -> None:
    """Forget every sampler this process compiled (``compiled_sampler``'s jitted functions
    and ``sampler_executable``'s executables) and JAX's own caches, so that the next
    request compiles afresh (benchmarks that time compiling)."""
    _EXECUTABLES.clear()
    _COMPILED.clear()
    jax.clear_caches()


def graph_keys(seed: int, first: int, count: int) -> jax.Array:
    """``[count]`` keys ``fold_in(key(seed), i)`` for request indices ``first .. first+count-1``."""
    return graph_keys_at(seed, np.arange(first, first + count))


def graph_keys_at(seed: int, indices) -> jax.Array:
    """``[len(indices)]`` keys ``fold_in(key(seed), i)`` for the request indices ``indices``."""
    root = jax.random.key(seed)
    idx = jnp.asarray(np.asarray(indices, dtype=np.int32))
    return jax.vmap(lambda i: jax.random.fold_in(root, i))(idx)


def sampling_buckets(run: Run) -> tuple[int, ...]:
    """The bucket sizes a run samples with: those it trained with
    (``buckets.run_bucket_sizes``), or ``()`` for a run without buckets."""
    return run_bucket_sizes(run.config, run.node_counts, run.max_nodes)


def checked_node_counts(node_counts, num_samples: int, max_nodes: int) -> np.ndarray:
    """``node_counts`` as ``int32[num_samples]``; SamplingError naming ``node_counts``
    unless it holds ``num_samples`` whole numbers in ``1..max_nodes``."""
    counts = np.asarray(node_counts)
    if counts.shape != (num_samples,):
        raise SamplingError(f"node_counts: expected one count per graph, shape ({num_samples},), "
                            f"got shape {counts.shape}")
    if counts.size and not (np.issubdtype(counts.dtype, np.integer)
                            or (np.issubdtype(counts.dtype, np.floating)
                                and np.all(counts == np.round(counts)))):
        raise SamplingError(f"node_counts: expected whole numbers, got {counts[:5].tolist()}...")
    counts = counts.astype(np.int64)
    if counts.size and (counts.min() < 1 or counts.max() > max_nodes):
        bad = counts[(counts < 1) | (counts > max_nodes)]
        raise SamplingError(f"node_counts: expected 1..{max_nodes} nodes per graph (this model "
                            f"was trained with max_nodes={max_nodes}), got {bad[:5].tolist()}")
    return counts.astype(np.int32)


def configured_num_steps(config, num_steps: int | None = 0) -> int | None:
    """The sampling steps a command uses: ``num_steps`` when positive, else the run's
    ``config.sample.num_steps``; None when both are 0 or unset (the process's default:
    all trained levels). Raises ValueError for a negative ``num_steps`` (naming it)."""
    if num_steps is not None and int(num_steps) < 0:
        raise ValueError(f"num_steps: expected 0 (the run's config.sample.num_steps) or a "
                         f"positive number of sampling steps, got {num_steps}")
    return int(num_steps or 0) or int(config.sample.get("num_steps", 0) or 0) or None


def generate(run: Run, num_samples: int, seed: int = 0, batch_size: int = 1024,
             num_steps: int | None = None, node_counts: np.ndarray | None = None,
             return_chain: bool = False, progress=None,
             devices=None, buckets: bool | None = None, label=None,
             properties: dict | None = None, guidance: float | None = None,
             **sampler_options) -> dict:
    """Sample ``num_samples`` graphs.

    Node counts come from the training split's distribution (seeded by
    ``seed``; for a ``label``, that of the training graphs of that class) unless given.
    A conditional run (``ddgjax.conditioning``) samples graphs of class ``label`` and/or
    with ``properties`` (``{"communities": 3}``) with classifier-free guidance of weight
    ``guidance`` (None or 0: none); neither label nor
    properties: its unconditional model. Batches all have ``batch_size`` graphs (the last is
    padded with empty graphs) so the sampler compiles once per shape (ahead of the
    first batch, timed apart: each graph is sampled once). ``sampler_options``
    go to the process's sampler (bit flips: ``algorithm=1|2``; Gaussian:
    ``eta``, ``clip_x0``); ``None`` values mean the run's default.
    ``devices`` (default: all) are the devices the batch is split over. ``buckets``
    (None: the run's ``config.data.buckets``; False: none) groups the graphs by size
    bucket (module docstring); ``batch_size`` is then the batch at ``max_nodes`` and
    smaller buckets take more graphs per batch.

    Returns a dict with ``adj`` (``uint8[M, N, N]``), ``num_nodes`` (``[M]``),
    ``graphs`` (networkx), ``seconds`` (sampling time, compiling excluded),
    ``compile_seconds`` (0 for shapes compiled by an earlier call),
    ``graphs_per_second``, the sampler's ``info``
    (as ``sampler`` and merged in: ``num_steps``, and e.g. ``algorithm``), and ``chain``
    (``[M, K+1, N, N]``) if asked. ``progress(done, total)`` is called with
    ``done=0`` before the first batch (which compiles) and after every batch.
    """
    _check_request(num_samples, batch_size, num_steps)
    sampler = _sampler(run, num_steps, return_chain, sampler_options)
    condition = request_condition(run, label, properties, guidance)
    if node_counts is None:
        node_counts = sample_node_counts(condition.node_counts, num_samples, seed)
    node_counts = checked_node_counts(node_counts, num_samples, run.max_nodes)
    return _sample_request(run, sampler, node_counts, lambda idx: graph_keys_at(seed, idx),
                           batch_size, return_chain, progress, devices, buckets, condition)


class RequestCondition(NamedTuple):
    """What a sampling request conditions on: ``vector`` (``float32[D]``, every graph's;
    None for an unconditional run), the ``guidance`` weight, the node-count distribution
    to draw from, and ``info`` (label, properties, guidance) for the records."""

    vector: np.ndarray | None
    guidance: float
    node_counts: NodeCountDistribution
    info: dict


def request_condition(run: Run, label=None, properties: dict | None = None,
                      guidance: float | None = None) -> RequestCondition:
    """The condition of a request on ``run`` (``generate``'s arguments). Raises
    SamplingError naming the value for a label or property the run was not trained on,
    a label given to an unconditional run, or guidance without a condition."""
    conds = run.conditions
    guidance = float(guidance or 0.0)
    asked = label is not None or bool(properties)
    if conds is None:
        if asked or guidance:
            raise SamplingError("this run was trained without labels (config.condition): "
                                "--label, --property and --guidance do not apply")
        return RequestCondition(None, 0.0, run.node_counts, {})
    if guidance and not asked:
        raise SamplingError(f"--guidance {guidance:g} needs a label or properties to guide "
                            "towards")
    try:
        vector = encode(conds, label, properties)
    except ConditionError as e:
        raise SamplingError(str(e)) from e
    counts = request_node_counts(conds, label) or run.node_counts
    info = {"label": label, "properties": dict(properties or {}), "guidance": guidance}
    return RequestCondition(vector, guidance, counts, info)


def generate_seeds(run: Run, num_samples: int, seeds, batch_size: int = 1024,
                   num_steps: int | None = None, progress=None, devices=None,
                   buckets: bool | None = None, label=None, properties: dict | None = None,
                   guidance: float | None = None, **sampler_options) -> list[dict]:
    """``[generate(run, num_samples, seed=s, ...) for s in seeds]``, sampled as one request.

    The graphs are ``generate``'s for each seed (graph ``i`` of seed ``s`` has the node
    count ``sample_node_counts(run.node_counts, num_samples, s)[i]`` and the key
    ``fold_in(key(s), i)``): the same in float32, in bfloat16 up to the draws that another
    batch shape moves (module docstring). All seeds' graphs share the batches: a run with
    size buckets compiles each bucket's batch shape once
    for all seeds, where a loop over ``generate`` meets a new power-of-two batch whenever
    a seed puts a different number of graphs in a bucket, and small per-seed groups fill
    their batches. Each result's ``seconds`` and ``compile_seconds`` are its equal share
    of the request's, whose totals and seeds are under ``request``; ``progress`` counts
    the request's graphs; ``label``, ``properties`` and ``guidance`` as for ``generate``.
    Raises SamplingError for an empty or repeated ``seeds`` (or one outside 0..2^31-1).
    """
    seeds = [int(s) for s in seeds]
    if (not seeds or len(set(seeds)) != len(seeds)
            or not all(0 <= s < 2 ** 31 for s in seeds)):
        raise SamplingError(f"seeds: expected distinct sampling seeds in 0..2^31-1, got {seeds}")
    _check_request(num_samples, batch_size, num_steps)
    sampler = _sampler(run, num_steps, False, sampler_options)
    condition = request_condition(run, label, properties, guidance)
    counts = np.concatenate([checked_node_counts(sample_node_counts(condition.node_counts,
                                                                    num_samples, s),
                                                 num_samples, run.max_nodes)
                             for s in seeds])
    seed_of = np.repeat(np.asarray(seeds, np.int64), num_samples)
    index_of = np.tile(np.arange(num_samples), len(seeds))
    res = _sample_request(run, sampler, counts, request_keys(seed_of, index_of), batch_size,
                          False, progress, devices, buckets, condition)
    share = 1.0 / len(seeds)
    request = {"seeds": seeds, "num_samples": int(counts.size), "seconds": res["seconds"],
               "compile_seconds": res["compile_seconds"]}
    out = []
    for k in range(len(seeds)):
        part = slice(k * num_samples, (k + 1) * num_samples)
        out.append({**res, "adj": res["adj"][part], "num_nodes": res["num_nodes"][part],
                    "graphs": res["graphs"][part], "seconds": res["seconds"] * share,
                    "compile_seconds": res["compile_seconds"] * share, "request": request})
    return out


def request_keys(seed_of: np.ndarray, index_of: np.ndarray):
    """Keys of a request that mixes seeds: ``keys(indices)`` is ``[len(indices)]`` keys,
    ``fold_in(key(seed_of[r]), index_of[r])`` for request index ``r`` (what
    ``graph_keys_at(seed_of[r], [index_of[r]])`` gives), and for padding slots (``r``
    past the request) ``fold_in(key(seed_of[0]), r)``, whose graphs are dropped."""
    total = len(seed_of)

    def keys(indices):
        r = np.asarray(indices, np.int64)
        real = r < total
        at = np.minimum(r, total - 1)
        seeds = np.where(real, seed_of[at], seed_of[0]).astype(np.int32)
        index = np.where(real, index_of[at], r).astype(np.int32)
        fold = lambda s, i: jax.random.fold_in(jax.random.key(s), i)
        return jax.vmap(fold)(jnp.asarray(seeds), jnp.asarray(index))
    return keys


def _check_request(num_samples: int, batch_size: int, num_steps: int | None) -> None:
    """SamplingError naming the option unless the request's sizes are usable."""
    if num_samples < 1:
        raise SamplingError(f"--num_samples must be positive, got {num_samples}")
    if batch_size < 1:
        raise SamplingError(f"--batch_size (config.sample.batch_size) must be positive, "
                            f"got {batch_size}")
    if num_steps is not None and num_steps < 0:
        raise SamplingError(f"--num_steps (config.sample.num_steps) must be >= 0, got {num_steps}")


def _sampler(run: Run, num_steps, return_chain: bool, sampler_options: dict) -> Sampler:
    """The run's sampler with ``sampler_options`` (``None`` values: the run's default)."""
    options = {k: v for k, v in sampler_options.items() if v is not None}
    try:
        return run.process.sampler(num_steps or None, return_chain, **options)
    except ValueError as e:
        raise SamplingError(str(e)) from e


@contextlib.contextmanager
def _worded_out_of_memory(batch: int, size: int, batch_size: int, max_nodes: int):
    """Turn the device's out-of-memory error for a batch of ``batch`` graphs padded to
    ``size`` nodes into a SamplingError that names the setting to lower."""
    try:
        yield
    except jax.errors.JaxRuntimeError as err:
        if "RESOURCE_EXHAUSTED" not in str(err):
            raise
        first = str(err).strip().splitlines()[0][:200]
        raise SamplingError(
            f"a batch of {batch} graphs of {size} nodes ran out of device memory ({first}); "
            f"lower the batch size (--batch_size, config.sample.batch_size: graphs per batch "
            f"at the model's {max_nodes} nodes, smaller size buckets take more; now "
            f"{batch_size})") from None


def _sample_request(run: Run, sampler: Sampler, node_counts: np.ndarray, keys_at,
                    batch_size: int, return_chain: bool, progress, devices,
                    buckets: bool | None, condition: RequestCondition | None = None) -> dict:
    """``generate``'s work for checked ``node_counts`` ``[M]``: graph ``r`` of the request
    drawn with ``keys_at([r])`` (``keys_at`` maps request indices, padding slots past
    ``M`` included, to keys), every graph under ``condition`` (None: unconditional)."""
    vector = None if condition is None else condition.vector
    guidance = 0.0 if condition is None else condition.guidance
    num_samples = int(node_counts.size)
    mesh = make_mesh(devices)
    n_dev = mesh.devices.size
    bounds = sampling_buckets(run) if buckets in (None, True) else ()
    if buckets and not bounds:
        raise SamplingError("buckets=True: this run was trained without size buckets "
                            "(config.data.buckets)")
    groups = sampling_groups(node_counts, run.max_nodes, bounds, batch_size, n_dev)
    sharding = batch_sharded(mesh)
    params = replicate(run.params, mesh)
    n_max = run.max_nodes
    out_adj = np.zeros((num_samples, n_max, n_max), np.uint8)
    out_chain = None
    t_compile, t_run, done = 0.0, 0.0, 0
    if progress is not None:
        progress(0, num_samples)
    for size, members, bsz in groups:
        num_batches = math.ceil(members.size / bsz)
        for b in range(num_batches):
            lo = b * bsz
            real = members[lo:lo + bsz]
            counts = np.zeros(bsz, np.int32)
            counts[:len(real)] = node_counts[real]
            # padding slots: the next indices (no buckets, as before), else indices past
            # the request (never a real graph's); their graphs are dropped
            pad = lo + np.arange(len(real), bsz) + (num_samples if bounds else 0)
            slots = np.concatenate([real, pad])
            keys = jax.device_put(keys_at(slots), sharding)
            mask = put_global(node_mask_from_counts(counts, size), sharding)
            cond = (None if vector is None else
                    put_global(np.tile(vector[None], (bsz, 1)), sharding))
            with _worded_out_of_memory(bsz, size, batch_size, n_max):
                if b == 0:  # one executable per batch shape
                    exe, dt = sampler_executable(run.model, sampler, params, keys, mask,
                                                 cond, guidance)
                    t_compile += dt
                t0 = time.time()
                res = jax.block_until_ready(exe(params, keys, mask, cond, guidance))
            t_run += time.time() - t0
            adj = res[0] if return_chain else res
            out_adj[real, :size, :size] = np.asarray(adj, dtype=np.uint8)[:len(real)]
            if return_chain:
                chain = np.asarray(res[1], dtype=np.uint8)[:len(real)]
                if out_chain is None:
                    out_chain = np.zeros((num_samples, chain.shape[1], n_max, n_max), np.uint8)
                out_chain[real, :, :size, :size] = chain
            done += len(real)
            if progress is not None:
                progress(done, num_samples)
    adj = out_adj
    result = {"adj": adj, "num_nodes": node_counts, "graphs": batch_to_graphs(adj, node_counts),
              "seconds": t_run, "compile_seconds": t_compile,
              "graphs_per_second": (num_samples / t_run) if t_run > 0 else float("nan"),
              "algorithm": sampler.info.get("algorithm"), **sampler.info,
              "sampler": sampler.info}
    if condition is not None and condition.info:
        result["condition"] = condition.info
        result["sampler"] = {**sampler.info, **condition.info}
    if bounds:
        result["buckets"] = [int(g[0]) for g in groups]
    if return_chain:
        result["chain"] = out_chain
    return result
