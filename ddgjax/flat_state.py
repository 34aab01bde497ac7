"""A train state as flat vectors, for the steps inside one jitted training chunk.

A train state has one array per parameter leaf in ``params``, in ``ema_params`` and in each
parameter-shaped part of the optimizer state (Adam's ``mu`` and ``nu``): 275 arrays for the
Ego-small PPGN 6x32. Updated leaf by leaf, the optimizer and the EMA are one small GPU
kernel or more per leaf, and a small model's step is bound by those launches
(docs/performance.md). :class:`FlatLayout` turns each of those trees into one vector for
the steps of a chunk, so that Adam, the EMA and the gradient sum over devices run on one
array each, and back into trees at the chunk's end. Outside a chunk (checkpoints,
sampling, validation) nothing changes.

A step on the flat state uses the same formulas as the per-leaf step and agrees with it
up to float rounding (XLA compiles the elementwise updates differently; a reduction over
all parameters, such as the gradient sum over devices, may sum in another order). That
holds only for optimizers whose update is elementwise apart from global reductions:
Adam (what ``training.make_optimizer`` builds), SGD, or a global-norm clip. Transforms
that work per leaf or read the tree's shapes (LAMB's per-leaf trust ratio, a weight-decay
mask, ``clip_by_block_rms``, ``multi_transform``) would change their arithmetic or fail.
A state that cannot be laid flat (:meth:`FlatLayout.of` is None) trains leaf by leaf.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree


@dataclasses.dataclass(frozen=True)
class FlatLayout:
    """How the parameter-shaped trees of one (unstacked) train state lie in flat vectors.

    ``params_def`` is the parameter tree's structure; every subtree of the state with that
    structure (``params``, ``ema_params``, Adam's moments) becomes one vector of the
    parameters' dtype, in ``jax.tree_util`` leaf order. Build it with :meth:`of`.
    """

    params_def: Any
    unravel: Callable[[jax.Array], Any]  # [P] -> the parameter tree

    @classmethod
    def of(cls, state) -> "FlatLayout | None":
        """The layout of ``state`` (a ``TrainState``, arrays or tracers, no seed axis), or
        None where it cannot be laid out flat: parameters of more than one dtype (a common
        vector would promote them), a parameter-shaped optimizer part of another dtype or
        shape, or fewer than two parameter leaves (nothing to gain). It cannot see what the
        optimizer does with the vectors (module docstring)."""
        leaves, params_def = jax.tree_util.tree_flatten(state.params)
        if len(leaves) < 2 or len({jnp.result_type(x) for x in leaves}) != 1:
            return None
        _, unravel = ravel_pytree(state.params)
        layout = cls(params_def, unravel)
        for tree in (state.ema_params, state.opt_state):  # same-structure parts must match
            for sub in layout._param_shaped(tree):
                if [jnp.result_type(x) for x in jax.tree_util.tree_leaves(sub)] != \
                        [jnp.result_type(x) for x in leaves] or \
                        [jnp.shape(x) for x in jax.tree_util.tree_leaves(sub)] != \
                        [jnp.shape(x) for x in leaves]:
                    return None
        return layout

    def _is_params(self, x) -> bool:
        return jax.tree_util.tree_structure(x) == self.params_def

    def _param_shaped(self, tree) -> list:
        """The subtrees of ``tree`` with the parameters' structure."""
        return [x for x in jax.tree_util.tree_leaves(tree, is_leaf=self._is_params)
                if self._is_params(x)]

    def _map(self, fn, tree):
        """``tree`` with every parameter-shaped subtree ``s`` replaced by ``fn(s)``."""
        return jax.tree_util.tree_map(lambda x: fn(x) if self._is_params(x) else x,
                                      tree, is_leaf=self._is_params)

    def params(self, flat: jax.Array):
        """``[P]`` -> the parameter tree (what ``model.apply`` takes)."""
        return self.unravel(flat)

    def flatten(self, state):
        """``TrainState`` -> the same ``TrainState`` type with ``params``, ``ema_params`` and
        every parameter-shaped part of ``opt_state`` as ``[P]`` vectors."""
        ravel = lambda tree: ravel_pytree(tree)[0]
        return dataclasses.replace(state, params=ravel(state.params),
                                   ema_params=ravel(state.ema_params),
                                   opt_state=self._map(ravel, state.opt_state))

    def unflatten(self, flat_state, like):
        """Inverse of :meth:`flatten`; ``like`` is a state of the original structure (arrays,
        tracers or shape structs; only its structure is read)."""
        opt = jax.tree_util.tree_map(
            lambda t, f: self.unravel(f) if self._is_params(t) else f,
            like.opt_state, flat_state.opt_state, is_leaf=self._is_params)
        return dataclasses.replace(flat_state, params=self.unravel(flat_state.params),
                                   ema_params=self.unravel(flat_state.ema_params), opt_state=opt)
