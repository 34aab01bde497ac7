"""Node orbit counts of 2-4-node graphlets (ORCA numbering), from dense matrix products.

For every node ``v`` of every graph in a padded batch, :func:`orbit_counts` returns the
15 counts ORCA's ``node 4`` mode returns: how many *induced* connected 2-, 3- and
4-node subgraphs contain ``v``, split by the automorphism orbit ``v`` occupies:

====  ===============================  ====  =========================================
 0    edge (= degree)                   8    4-cycle C4
 1    path P3, end                      9    paw (triangle + pendant), pendant node
 2    path P3, middle                  10    paw, triangle node of degree 2
 3    triangle                         11    paw, node of degree 3
 4    path P4, end                     12    diamond (K4 minus an edge), degree-2 node
 5    path P4, middle                  13    diamond, degree-3 node
 6    star K1,3, leaf                  14    K4
 7    star K1,3, centre
====  ===============================  ====  =========================================

Method. With ``A`` the adjacency, ``d`` the degrees, ``c = A @ A`` the common-neighbour
counts and ``t`` the triangles per node, we first count *non-induced* copies of each
4-node pattern at ``v`` (a copy is a set of edges of ``G`` forming the pattern, with
``v`` in the given orbit), all in closed form:

* P4 end:      ``(A^2 (d-1))_v - d_v (d_v-1) - 2 t_v``
* P4 middle:   ``(d_v-1) (A (d-1))_v - 2 t_v``
* star leaf:   ``sum_{u~v} C(d_u-1, 2)``;  star centre: ``C(d_v, 3)``
* C4:          ``((A^4)_vv - (A d)_v - d_v (d_v-1)) / 2``
* paw pendant: ``(A t)_v - 2 t_v``;  paw degree 2: ``sum_{u~v} c_vu (d_u-2)``;
  paw centre: ``t_v (d_v-2)``
* diamond degree 2: ``1/2 sum_{u,w ~ v, u~w} (c_uw - 1)``;
  diamond degree 3: ``sum_{u~v} C(c_vu, 2)``
* K4: triangles inside ``v``'s neighbourhood (a gathered ``D x D`` block per node,
  ``D`` = max degree, so the cost is ``N D^3`` rather than ``N^4``).

A non-induced copy lives inside exactly one induced 4-node graphlet, so
``noninduced = M @ induced`` with ``M[o, o']`` = the number of copies of pattern ``o``
(with ``v`` in orbit ``o``) that graphlet ``o'`` (with ``v`` in orbit ``o'``) contains.
``M`` is unit upper-triangular when orbits are ordered by edge count, and its integer
inverse :data:`INDUCED_FROM_NONINDUCED` gives the induced counts.
``tests/test_orbits.py`` re-derives ``M`` by enumerating edge subsets and checks every
orbit against brute-force enumeration of induced subgraphs.

Exactness. Matrix products run in float32 at ``Precision.HIGHEST`` for ``N <= 256``
(every integer that occurs, at most ``N^3 <= 2^24``, is then exact) and in int32
beyond that; everything after the products is int32. Counts are exact integers.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

NUM_ORBITS = 15

# Rows: non-induced pattern-orbit counts (orbits 4..14); columns: induced orbits 4..14.
# Entry [o, o'] = copies of (pattern o, v in orbit o) in (graphlet o', v in orbit o').
NONINDUCED_FROM_INDUCED = np.array([
    #  4  5  6  7  8  9 10 11 12 13 14    induced orbit o'
    [1, 0, 0, 0, 2, 2, 1, 0, 4, 2, 6],  # 4  P4 end
    [0, 1, 0, 0, 2, 0, 1, 2, 2, 4, 6],  # 5  P4 middle
    [0, 0, 1, 0, 0, 1, 1, 0, 2, 1, 3],  # 6  star leaf
    [0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1],  # 7  star centre
    [0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 3],  # 8  C4
    [0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 3],  # 9  paw pendant
    [0, 0, 0, 0, 0, 0, 1, 0, 2, 2, 6],  # 10 paw degree 2
    [0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 3],  # 11 paw centre
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 3],  # 12 diamond degree 2
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3],  # 13 diamond degree 3
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],  # 14 K4
], dtype=np.int64)

INDUCED_FROM_NONINDUCED = np.rint(np.linalg.inv(NONINDUCED_FROM_INDUCED)).astype(np.int64)
assert (INDUCED_FROM_NONINDUCED @ NONINDUCED_FROM_INDUCED == np.eye(11, dtype=np.int64)).all()

# Matmuls with float32 inputs/accumulators are exact while every partial sum stays
# below 2**24; the largest integer any product here produces is below N**3.
_FLOAT32_EXACT_MAX_NODES = 256


def max_degree_bucket(adj) -> int:
    """A static neighbourhood size for :func:`orbit_counts`: the max degree, rounded up.

    Rounded up to a multiple of 4 so that jit compiles once for many batches.
    """
    a = np.asarray(adj) > 0.5
    if a.size == 0:
        return 4
    d = int((a.sum(-1) + a.sum(-2)).max())   # >= the degree after symmetrisation
    return max(4, -(-d // 4) * 4)


def orbit_counts(adj, node_mask, max_degree: int | None = None) -> jax.Array:
    """Per-node orbit counts ``int32[B, N, 15]`` of a padded batch (ORCA node orbits 0-14).

    Args:
      adj: ``[B, N, N]`` 0/1 adjacency (symmetric; diagonal and padding are ignored).
      node_mask: ``[B, N]`` bool, True on real nodes.
      max_degree: static bound on the degree of any node, the size of the gathered
        neighbourhood block used for K4 counts. ``None`` means: the actual maximum when
        ``adj`` is a concrete array, ``N`` under a trace. A bound that is too small is
        wrong silently, so pass one only if you know it holds (see
        :func:`max_degree_bucket`).

    Returns:
      ``int32[B, N, 15]``; rows of padding nodes are zero.

    Example::

        >>> import networkx as nx, numpy as np
        >>> a = nx.to_numpy_array(nx.cycle_graph(4))[None].astype(np.float32)
        >>> orbit_counts(a, np.ones((1, 4), bool))[0, 0].tolist()
        [2, 2, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    """
    n = adj.shape[-1]
    if max_degree is None:
        try:
            max_degree = max_degree_bucket(np.asarray(adj))
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            max_degree = n
    max_degree = int(min(max(max_degree, 1), max(n, 1)))
    return _orbit_counts(jnp.asarray(adj), jnp.asarray(node_mask, dtype=bool), max_degree)


@partial(jax.jit, static_argnames=("max_degree",))
def _orbit_counts(adj, node_mask, max_degree: int):
    b, n, _ = adj.shape
    # Clean the input inside jit: symmetric 0/1, no diagonal, no padding rows/columns.
    pair = node_mask[:, :, None] & node_mask[:, None, :] & ~jnp.eye(n, dtype=bool)
    a_bool = (adj > 0.5) & pair
    a_bool = a_bool | jnp.swapaxes(a_bool, -1, -2)

    if n <= _FLOAT32_EXACT_MAX_NODES:
        mm_dtype, prec = jnp.float32, jax.lax.Precision.HIGHEST
    else:
        mm_dtype, prec = jnp.int32, None
    a = a_bool.astype(mm_dtype)
    mm = partial(jnp.matmul, precision=prec)

    def to_int(x):
        return jnp.rint(x).astype(jnp.int32) if mm_dtype == jnp.float32 else x.astype(jnp.int32)

    ai = a_bool.astype(jnp.int32)
    deg = ai.sum(-1)                                         # [B, N]
    c_f = mm(a, a)                                           # common neighbours, [B, N, N]
    c = to_int(c_f)
    tri2 = (ai * c).sum(-1)                                  # 2 t_v
    tri = tri2 // 2

    def matvec(x):                                           # A @ x for int32 x [B, N]
        return to_int(mm(a, x.astype(mm_dtype)[..., None])[..., 0])

    dm1 = deg - 1
    a_dm1 = matvec(dm1)                                      # sum_{u~v} (d_u - 1)
    a2_dm1 = to_int(mm(c_f, dm1.astype(mm_dtype)[..., None])[..., 0])   # (A^2 (d-1))_v
    a_deg = a_dm1 + deg                                      # (A d)_v
    a_tri = matvec(tri)                                      # (A t)_v
    a4_diag = (c * c).sum(-1)                                # (A^4)_vv = sum_u c_vu^2

    # 2- and 3-node orbits.
    o0 = deg
    o3 = tri
    o2 = deg * (deg - 1) // 2 - tri
    o1 = a_dm1 - tri2

    # Non-induced 4-node pattern counts.
    n4 = a2_dm1 - deg * dm1 - tri2
    n5 = dm1 * a_dm1 - tri2
    n6 = (ai * ((deg - 1) * (deg - 2) // 2)[:, None, :]).sum(-1)
    n7 = deg * (deg - 1) * (deg - 2) // 6
    n8 = (a4_diag - a_deg - deg * dm1) // 2
    n9 = a_tri - tri2
    n10 = (ai * c * (deg - 2)[:, None, :]).sum(-1)
    n11 = tri * (deg - 2)
    # Diamond, v of degree 2: (1/2) sum_{u,w} A_vu A_vw A_uw (c_uw - 1) = diag(A B A)/2.
    bmat = (ai * (c - 1)).astype(mm_dtype)
    n12 = to_int((mm(a, bmat) * a).sum(-1)) // 2
    n13 = (ai * (c * (c - 1) // 2)).sum(-1)
    n14 = _k4_per_node(a_bool, deg, max_degree)

    nonind = jnp.stack([n4, n5, n6, n7, n8, n9, n10, n11, n12, n13, n14], -1)  # [B, N, 11]
    inv = jnp.asarray(INDUCED_FROM_NONINDUCED, dtype=jnp.int32)
    induced4 = jnp.einsum("bnj,ij->bni", nonind, inv)
    out = jnp.concatenate([jnp.stack([o0, o1, o2, o3], -1), induced4], -1)
    return jnp.where(node_mask[..., None], out, 0)


def _k4_per_node(a_bool, deg, max_degree: int):
    """Number of K4 containing each node: triangles inside its neighbourhood.

    Gathers each node's neighbourhood block ``S = A[N(v), N(v)]`` padded to ``D``
    (the neighbour indices are the ``top_k`` of the 0/1 adjacency row; slots past the
    degree are masked), then counts triangles as ``sum((S @ S) * S) / 6``.
    """
    b, n, _ = a_bool.shape
    d = max_degree
    # Indices of the (at most D) neighbours come first: top_k of the 0/1 row.
    order = jax.lax.top_k(a_bool.astype(jnp.float32), d)[1]              # [B, N, D]
    valid = jnp.arange(d)[None, None, :] < deg[..., None]                 # [B, N, D]
    flat = order[:, :, :, None] * n + order[:, :, None, :]                # [B, N, D, D]
    sub = jnp.take_along_axis(a_bool.reshape(b, n * n), flat.reshape(b, -1), axis=1)
    sub = sub.reshape(b, n, d, d) & valid[..., :, None] & valid[..., None, :]
    s = sub.astype(jnp.float32)
    # Entries of S @ S are at most D, exact in float32; the sum is done in int32.
    ss = jnp.rint(jnp.matmul(s, s, precision=jax.lax.Precision.HIGHEST)).astype(jnp.int32)
    return jnp.where(sub, ss, 0).sum((-1, -2)) // 6
