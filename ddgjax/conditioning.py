"""Conditional generation: graph labels -> condition vectors, and classifier-free guidance.

A run trained with ``config.condition.on`` (``"label"`` and/or property names)
conditions its denoiser on a vector ``c`` per graph (docs/method.md, "Conditional
generation"):

    c = [one_hot(class) (C), standardised properties (P), 1]      # float32[C + P + 1]

and on the **null condition** ``c = 0`` (all zeros, the last entry too) for a graph whose
condition training dropped (probability ``config.condition.dropout``). One model is thus
both conditional and unconditional. The class vocabulary, the properties' means and
standard deviations and the node-count distribution of each class are the run's
:class:`Conditions`, stored in its dataset record (``dataset.json``, and the meta of a
pretrained file), so that sampling encodes a request the way training encoded the data.

Classifier-free guidance with weight ``w`` (``w = 0``: plain conditional sampling) tilts
each pair's ``p(a_0 | A_t, c)`` by the ratio of the conditional to the unconditional
prediction, ``p_w(a_0) ∝ p(a_0 | A_t, c)^(1+w) p(a_0 | A_t)^(-w)``. For one Bernoulli pair
the normalised tilt is again a Bernoulli whose logit is

    logit_w = (1 + w) * logit(A_t, c) - w * logit(A_t, null)          (guided_logits)

and Algorithms 1 and 2 use it in place of the model's ``p_theta(A_0 | A_t)``.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Sequence

import numpy as np

from ddgjax.data.node_counts import NodeCountDistribution, node_count_distribution


class ConditionError(ValueError):
    """A label or property that cannot be used; the message names the graph or the value."""


class Conditions(NamedTuple):
    """How a run encodes conditions.

    Attributes:
      classes: the class labels seen in training, sorted by their text (labels are
        matched as text: ``3`` and ``"3"`` are one class); empty when the run does not
        condition on a class.
      properties: ``(name, mean, std)`` of each conditioned property over the training
        graphs (std 1 where the property is constant).
      node_counts: class -> the node-count distribution of its training graphs.
    """

    classes: tuple
    properties: tuple
    node_counts: dict

    @property
    def dim(self) -> int:
        """Width of the condition vector: one-hot classes, properties, the present flag."""
        return len(self.classes) + len(self.properties) + 1

    def to_dict(self) -> dict:
        return {"classes": list(self.classes),
                "properties": [{"name": n, "mean": m, "std": s} for n, m, s in self.properties],
                "node_counts": {k: v.to_dict() for k, v in self.node_counts.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "Conditions":
        return cls(tuple(str(c) for c in d["classes"]),
                   tuple((str(p["name"]), float(p["mean"]), float(p["std"]))
                         for p in d["properties"]),
                   {str(k): NodeCountDistribution.from_dict(v)
                    for k, v in d.get("node_counts", {}).items()})


def parse_condition_on(text: str) -> tuple[bool, tuple[str, ...]]:
    """``config.condition.on`` -> ``(use_label, property names)``: comma-separated, the
    word ``label`` for the class label, any other name a property (``"label,communities"``
    -> ``(True, ("communities",))``; ``""`` -> unconditional)."""
    names = [p.strip() for p in str(text).split(",") if p.strip()]
    return "label" in names, tuple(p for p in names if p != "label")


def record_dim(record: dict | None) -> int:
    """The condition width of a run from its dataset record (0: unconditional)."""
    conds = (record or {}).get("conditions")
    return 0 if conds is None else Conditions.from_dict(conds).dim


def _graph_where(source: str, index) -> str:
    return f"{source}: graph {index}" if index is not None else source


def conditions_from_graphs(graphs: Sequence, use_label: bool, properties: Sequence[str],
                           source: str = "training data", indices=None) -> Conditions | None:
    """The :class:`Conditions` of the training graphs (networkx graphs whose
    ``graph["label"]`` / ``graph["properties"]`` hold the labels), or None when the run
    conditions on nothing. ``indices`` (default ``0..``) are the graphs' numbers as the
    data file counts them, for errors. Raises ConditionError naming the first graph that
    lacks the label or a property."""
    properties = tuple(properties)
    if not use_label and not properties:
        return None
    indices = list(range(len(graphs))) if indices is None else list(indices)
    labels, values = [], {p: [] for p in properties}
    for g, i in zip(graphs, indices):
        if use_label:
            if g.graph.get("label") is None:
                raise ConditionError(f"{_graph_where(source, i)} has no 'label' "
                                     "(config.condition.on asks every training graph for one)")
            labels.append(str(g.graph["label"]))
        props = g.graph.get("properties") or {}
        for p in properties:
            if p not in props:
                raise ConditionError(f"{_graph_where(source, i)} has no property {p!r} "
                                     "(config.condition.on asks every training graph "
                                     "for it)")
            values[p].append(float(props[p]))
    classes = tuple(sorted(set(labels)))
    stats = []
    for p in properties:
        v = np.asarray(values[p], np.float64)
        std = float(v.std())
        stats.append((p, float(v.mean()), std if std > 0 else 1.0))
    by_class = {}
    for c in classes:
        members = [g for g, lab in zip(graphs, labels) if lab == c]
        by_class[c] = node_count_distribution(members)
    return Conditions(classes, tuple(stats), by_class)


def encode(conds: Conditions, label=None, properties: dict | None = None) -> np.ndarray:
    """One request -> ``float32[conds.dim]``. ``label`` must be a class of ``conds`` where
    the run conditions on a class; ``properties`` must name every conditioned property
    (numbers). ``label=None`` and no properties: the null condition (unconditional).
    Raises ConditionError naming the value."""
    properties = dict(properties or {})
    if label is None and not properties:
        return np.zeros(conds.dim, np.float32)
    unknown = sorted(set(properties) - {p for p, _, _ in conds.properties})
    if unknown:
        known = ", ".join(p for p, _, _ in conds.properties) or "none"
        raise ConditionError(f"property {unknown[0]!r}: the model was not trained on it "
                             f"(its properties: {known})")
    c = np.zeros(conds.dim, np.float32)
    if conds.classes:
        if label is None:
            raise ConditionError(f"a label is needed: the model conditions on a class "
                                 f"({', '.join(conds.classes)})")
        if str(label) not in conds.classes:
            raise ConditionError(f"label {label!r} was not seen in training (classes: "
                                 f"{', '.join(conds.classes)})")
        c[conds.classes.index(str(label))] = 1.0
    elif label is not None:
        raise ConditionError(f"label {label!r}: the model was trained without class labels")
    for k, (p, mean, std) in enumerate(conds.properties):
        if p not in properties:
            raise ConditionError(f"property {p!r} is needed: the model conditions on it")
        v = properties[p]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ConditionError(f"property {p!r}: expected a finite number, got {v!r}")
        c[len(conds.classes) + k] = (float(v) - mean) / std
    c[-1] = 1.0
    return c


def encode_graphs(conds: Conditions, graphs: Sequence) -> np.ndarray:
    """The training graphs' conditions, ``float32[G, conds.dim]`` (labels checked by
    :func:`conditions_from_graphs`)."""
    out = np.zeros((len(graphs), conds.dim), np.float32)
    names = [p for p, _, _ in conds.properties]
    for i, g in enumerate(graphs):
        props = g.graph.get("properties") or {}
        out[i] = encode(conds, g.graph.get("label") if conds.classes else None,
                        {p: props[p] for p in names})
    return out


def request_node_counts(conds: Conditions, label) -> NodeCountDistribution | None:
    """The node counts of the training graphs of class ``label`` (None: no such
    distribution, e.g. an unconditional request; use the run's overall one)."""
    if conds is None or label is None:
        return None
    return conds.node_counts.get(str(label))


def guided_logits(cond_logits, uncond_logits, guidance: float):
    """Classifier-free guidance on Bernoulli logits: ``(1 + w) l_c - w l_u`` (any shape,
    numpy or jax; ``w`` a number or a traced scalar); a number ``w = 0`` returns
    ``cond_logits`` itself."""
    if isinstance(guidance, (int, float)) and guidance == 0:
        return cond_logits
    return cond_logits + guidance * (cond_logits - uncond_logits)


def condition_denoiser(apply, cond, guidance: float = 0.0):
    """A denoiser ``(a, m, t, s) -> logits`` from ``apply(a, m, t, s, cond)`` and a batch of
    conditions ``cond [B, D]`` (None: an unconditional model, ``apply`` without it).

    With ``guidance != 0`` each call runs the model once on a doubled batch, the graphs
    with their conditions and with the null condition, and returns
    :func:`guided_logits`; the per-step cost is that of a batch twice as large."""
    import jax.numpy as jnp

    if cond is None:
        return lambda a, m, t, s: apply(a, m, t, s)
    if isinstance(guidance, (int, float)) and guidance == 0:   # a traced weight: guided
        return lambda a, m, t, s: apply(a, m, t, s, cond)

    def guided(a, m, t, s):
        two = lambda x: jnp.concatenate([x, x], axis=0)
        both = apply(two(a), two(m), two(t), two(s),
                     jnp.concatenate([cond, jnp.zeros_like(cond)], axis=0))
        b = a.shape[0]
        return guided_logits(both[:b], both[b:], guidance)

    return guided


def drop_conditions(cond, keys, dropout: float):
    """Training's label dropout: each graph's condition ``cond [B, D]`` replaced by the
    null condition (zeros) with probability ``dropout``, drawn from ``keys [B]`` (one per
    graph: stream 2 of ``fold_in``, apart from the level's 0 and the noise's 1)."""
    import jax
    import jax.numpy as jnp

    if dropout <= 0:
        return cond
    u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, 2), ()))(keys)
    return jnp.where((u < dropout)[:, None], 0.0, cond)
