"""Data parallelism over all devices: the mesh, shardings and host copies.

The pmap pattern written with ``jax.shard_map``: a 1-D mesh of every (global)
device with the axis ``AXIS``; batches are split over it, parameters are
replicated, gradients are summed over it. One device is a one-device mesh
running the same code.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

AXIS = "data"


def make_mesh(devices=None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: all global devices) with axis ``AXIS``."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    """The sharding of an array every device holds whole."""
    return NamedSharding(mesh, P())


def batch_sharded(mesh: Mesh, batch_axis: int = 0) -> NamedSharding:
    """The sharding of an array split over ``AXIS`` along ``batch_axis``."""
    return NamedSharding(mesh, P(*([None] * batch_axis), AXIS))


def put_global(x: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """Host array (identical on every process) -> global array with ``sharding``."""
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Every leaf of ``tree`` (host values identical on all processes) replicated on ``mesh``."""
    sharding = replicated(mesh)
    return jax.tree_util.tree_map(lambda x: put_global(np.asarray(x), sharding), tree)


def to_host(tree: Any) -> Any:
    """Replicated (possibly multi-host) arrays -> numpy, via this process's own copy."""

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return np.asarray(x.addressable_data(0))
        return np.asarray(x)

    return jax.tree_util.tree_map(one, tree)
