"""The train state, the optimizer, and the jitted, data-parallel train step.

Data parallelism follows the pmap pattern, written with ``jax.shard_map`` over the 1-D
device mesh of ``ddgjax.parallel``: each device takes a slice of the batch, computes
the gradient of its summed loss terms, and the gradients and pair counts are summed
over the named axis. Per-graph noise comes from ``fold_in(step_key, global graph
index)`` with ``step_key = fold_in(base_key, step)``, so the result depends neither on
the number of devices nor on where a run was resumed.

Many steps run inside one ``jax.lax.scan`` (a *chunk*: one jitted call); the batches are
indices into the device copy of the training set (``ddgjax.input_pipeline``). Inside a
chunk the state is flat (``ddgjax.flat_state``: one vector each for the parameters, the
EMA and Adam's moments), so the optimizer is a few kernels instead of several per
parameter leaf. The noise process (``ddgjax.processes``) supplies the loss; this module
never names one.
"""
from __future__ import annotations

from typing import Any, Callable

import flax
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, PartitionSpec as P

from ddgjax.conditioning import drop_conditions
from ddgjax.flat_state import FlatLayout
from ddgjax.models import init_params
from ddgjax.parallel import AXIS
from ddgjax.processes import NoiseProcess

# Adam's moment decays (the paper's; not config keys).
ADAM_B1, ADAM_B2 = 0.9, 0.999


@flax.struct.dataclass
class TrainState:
    """Everything a step changes. ``ema_params`` equals ``params`` when EMA is off.

    The field names are the checkpoint layout (``ddgjax.checkpoints``).
    """

    step: jax.Array
    params: Any
    ema_params: Any
    opt_state: Any


def make_optimizer(train_cfg, steps_per_epoch: int) -> optax.GradientTransformation:
    """Adam (``b1 = 0.9``, ``b2 = 0.999``) with the learning rate ``train_cfg.lr``
    multiplied by ``train_cfg.lr_decay_per_epoch`` after each epoch of
    ``steps_per_epoch`` steps (the paper's "weight decay 0.999")."""
    lr = optax.exponential_decay(train_cfg.lr, transition_steps=steps_per_epoch,
                                 decay_rate=train_cfg.lr_decay_per_epoch, staircase=True)
    return optax.adam(lr, b1=ADAM_B1, b2=ADAM_B2)


def init_state(model, tx, key: jax.Array, max_nodes: int) -> TrainState:
    """Fresh parameters (``ddgjax.models.init_params``) and optimizer state at step 0."""
    params = init_params(model, key, max_nodes)
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, ema_params=params,
                      opt_state=tx.init(params))


def graph_keys(step_key: jax.Array, first_index, count: int) -> jax.Array:
    """``[count]`` keys ``fold_in(step_key, first_index + i)``: one per global graph slot."""
    idx = first_index + jnp.arange(count, dtype=jnp.int32)
    return jax.vmap(lambda i: jax.random.fold_in(step_key, i))(idx)


def ema_update(ema_params, params, decay: float):
    """``decay * ema + (1 - decay) * params`` leaf by leaf; ``params`` itself when decay is 0."""
    if decay <= 0:
        return params
    return jax.tree_util.tree_map(lambda e, p: decay * e + (1 - decay) * p, ema_params, params)


def _train_step(model, tx, process: NoiseProcess, ema_decay: float,
                layout: FlatLayout | None, cond_dropout: float = 0.0) -> Callable:
    """``one_step(state, idx, data, base_key, weight=None) -> (state, loss)``:
    one optimizer step on this device's slice ``idx`` (``int32[B_local]``) of a batch of
    ``data`` (a ``GraphBatch``: ``adj``, ``node_mask`` and, for a conditional model,
    ``cond``, whose rows training replaces by the null condition with probability
    ``cond_dropout``), for use inside ``shard_map`` over ``AXIS`` (gradients and loss are
    summed over the axis).
    ``weight`` (a scalar, size buckets) multiplies the gradient; the returned loss is the
    batch's unweighted per-pair mean. With a ``layout``, ``state`` is flat
    (``FlatLayout.flatten``) and so are the gradients and the optimizer's work; without
    one (a state that cannot be laid flat), leaf by leaf."""

    def one_step(state, idx, data, base_key, weight=None):
        local_b = idx.shape[0]
        first = jax.lax.axis_index(AXIS) * local_b
        adj0, mask = data.adj[idx], data.node_mask[idx]
        keys = graph_keys(jax.random.fold_in(base_key, state.step), first, local_b)
        cond = None if data.cond is None else drop_conditions(data.cond[idx], keys,
                                                               cond_dropout)

        def summed(params):
            tree = params if layout is None else layout.params(params)
            if cond is None:
                denoise = lambda a, m, t, s: model.apply(tree, a, m, t, s)
            else:
                denoise = lambda a, m, t, s: model.apply(tree, a, m, t, s, cond)
            out = process.loss(denoise, keys, adj0, mask)
            return out.per_graph.sum(), out.num_pairs.sum()

        (local_sum, local_pairs), grads = jax.value_and_grad(summed, has_aux=True)(state.params)
        total_pairs = jnp.maximum(jax.lax.psum(local_pairs, AXIS), 1.0)
        grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, AXIS) / total_pairs, grads)
        if weight is not None:
            grads = jax.tree_util.tree_map(lambda g: g * weight.astype(g.dtype), grads)
        loss = jax.lax.psum(local_sum, AXIS) / total_pairs
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        ema = ema_update(state.ema_params, params, ema_decay)
        return TrainState(state.step + 1, params, ema, opt_state), loss

    return one_step


def _sharded(per_device, mesh: Mesh, batch_spec, extra_specs=()) -> Callable:
    # check_vma=False gives the classic pmap semantics: the gradient of the
    # replicated parameters is each device's local gradient, and we sum it over
    # the axis ourselves. (With check_vma=True, JAX would already insert that
    # psum in the transpose, and ours would count it n_dev times.)
    return jax.jit(jax.shard_map(per_device, mesh=mesh,
                                 in_specs=(P(), P(), batch_spec, *extra_specs),
                                 out_specs=(P(), P()), check_vma=False))


def _scan_steps(make_step: Callable, state, xs, stacked: bool = False):
    """``lax.scan(make_step(layout), state, xs)`` on the flat state (``FlatLayout.of``),
    turned back into trees at the end; leaf by leaf (``layout=None``) for a state that
    cannot be laid flat. ``stacked``: the leaves carry a leading run axis ``[R, ...]``."""
    one = jax.tree_util.tree_map(lambda x: x[0], state) if stacked else state
    layout = FlatLayout.of(one)
    if layout is None:
        return jax.lax.scan(make_step(None), state, xs)
    to_flat, from_flat = layout.flatten, lambda f: layout.unflatten(f, one)
    if stacked:
        to_flat, from_flat = jax.vmap(to_flat), jax.vmap(from_flat)
    flat_state, out = jax.lax.scan(make_step(layout), to_flat(state), xs)
    return from_flat(flat_state), out


def make_train_chunk(model, tx, process: NoiseProcess, mesh: Mesh, base_key: jax.Array,
                     ema_decay: float = 0.0, weighted: bool = False,
                     cond_dropout: float = 0.0) -> Callable:
    """Build ``chunk(state, data, batch_idx[, step_weight]) -> (state, losses)``, jitted:
    ``S`` optimizer steps in one ``lax.scan``.

    The loss is ``process.loss`` with ``model.apply`` as the denoiser. The compiled
    program has no host callback (the training loop shows progress between calls). The
    steps run on the flat state (``ddgjax.flat_state``), which needs an optimizer whose
    update is elementwise apart from global reductions (Adam as ``make_optimizer``
    builds it, SGD).

    Args of the returned function:
      state: replicated TrainState.
      data: the whole padded training set (replicated), a ``GraphBatch`` of ``adj
        [G, N, N]``, ``node_mask [G, N]`` and ``cond [G, D]`` or None. Index ``G - 1``
        must be an empty graph (all-False mask), used to pad incomplete batches.
      batch_idx: ``int32[S, B]`` graph indices of S consecutive steps, sharded
        over the batch axis (B divisible by the number of devices).
      step_weight: only with ``weighted=True`` (size buckets): ``float32[S]``, each
        step's gradient is multiplied by its weight (``buckets.plan_buckets``).
    Returns: the state after S steps and ``float32[S]`` batch losses (per-pair means,
    unweighted). The function compiles once per shape of ``data_adj`` and ``batch_idx``
    (with size buckets: once per bucket).
    """
    step_for = lambda layout: _train_step(model, tx, process, ema_decay, layout, cond_dropout)

    if weighted:
        def per_device(state, data, batch_idx, step_weight):
            def make_step(layout):
                one_step = step_for(layout)
                return lambda st, x: one_step(st, x[0], data, base_key, x[1])
            return _scan_steps(make_step, state, (batch_idx, step_weight))

        return _sharded(per_device, mesh, P(None, AXIS), (P(),))

    def per_device(state, data, batch_idx):
        def make_step(layout):
            one_step = step_for(layout)
            return lambda st, idx: one_step(st, idx, data, base_key)
        return _scan_steps(make_step, state, batch_idx)

    return _sharded(per_device, mesh, P(None, AXIS))


def make_train_chunk_seeds(model, tx, process: NoiseProcess, mesh: Mesh, base_keys: jax.Array,
                           ema_decay: float = 0.0, cond_dropout: float = 0.0) -> Callable:
    """``make_train_chunk`` for several independent runs (seeds) in one program.

    Every leaf of the state carries a leading seed axis ``[R, ...]`` and run ``r`` uses
    only its own state, its own ``base_keys[r]`` and its own batches; one jitted step
    (``jax.vmap`` over the runs inside the data-parallel ``shard_map``) advances all of
    them, which keeps small models from being bound by kernel launches.

    Args of the returned function: ``states`` (replicated, leaves ``[R, ...]``),
    ``data`` as for ``make_train_chunk``, and ``batch_idx``
    ``int32[S, R, B]`` (sharded over B). Returns the states after S steps and
    ``float32[S, R]`` losses. Run ``r`` equals ``make_train_chunk`` with
    ``base_keys[r]`` on ``states[r]`` and ``batch_idx[:, r]``.
    """

    def per_device(states, data, batch_idx):
        def make_step(layout):
            one_step = _train_step(model, tx, process, ema_decay, layout, cond_dropout)
            step_all = jax.vmap(lambda st, idx, key: one_step(st, idx, data, key))
            return lambda st, idx: step_all(st, idx, base_keys)

        return _scan_steps(make_step, states, batch_idx, stacked=True)

    return _sharded(per_device, mesh, P(None, None, AXIS))
