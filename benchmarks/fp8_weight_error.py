"""What rounding a trained PPGN's weights to float8 (``DDGJAX_FP8_ACTIVATIONS=weights`` /
``weights_y``, or ``config.model.ppgn.fp8_weights``) does to its predictions, on the CPU:
test graphs noised to several levels, the logits with the weights as trained and rounded
(``ppgn.fp8_rounded_params``), in float32 and bfloat16 (XLA), against float32 as trained.

    python benchmarks/fp8_weight_error.py --workdir W [--checkpoint best_val --ema] \
        --data spectre_sbm --max_nodes 110 [--graphs 8] [--out F.json]

Per level and arm: the predicted edge count over the true one (``density_ratio``), the
binary cross-entropy against ``A_0``, and the logits' RMS difference and mean shift from
float32 as trained, over the real off-diagonal pairs. Session 33 ran it on round 67's SBM
checkpoint (docs/benchmarks.md, "Rounds 69-72").
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ddgjax import load_dataset  # noqa: E402
from ddgjax.models.ppgn import fp8_rounded_params  # noqa: E402
from ddgjax.processes import bitflip  # noqa: E402
from ddgjax.sampling import load_run  # noqa: E402

LEVELS = (0.02, 0.1, 0.2, 0.3, 0.4, 0.45)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best_val", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--data", required=True, help="a bundled dataset, e.g. spectre_sbm")
    ap.add_argument("--max_nodes", type=int, default=110, help="test graphs up to this size")
    ap.add_argument("--graphs", type=int, default=8)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    graphs = [g for g in load_dataset(a.data).test if g.number_of_nodes() <= a.max_nodes]
    graphs = graphs[:a.graphs]
    if not graphs:
        sys.exit(f"--data {a.data}: no test graph has at most {a.max_nodes} nodes")
    n = max(g.number_of_nodes() for g in graphs)
    b = len(graphs)
    adj0 = np.zeros((b, n, n), np.float32)
    mask = np.zeros((b, n), bool)
    for i, g in enumerate(graphs):
        k = g.number_of_nodes()
        adj0[i, :k, :k] = nx.to_numpy_array(g, nodelist=sorted(g.nodes()))
        mask[i, :k] = True
    pairs = mask[:, :, None] & mask[:, None, :] & ~np.eye(n, dtype=bool)[None]
    logits = {}
    for dtype in ("float32", "bfloat16"):
        run = load_run(a.workdir, a.checkpoint, use_ema=a.ema or None, compute_dtype=dtype,
                       pallas=False)
        ppgn = run.config.model.ppgn
        arms = {"trained": run.params,
                "rounded": fp8_rounded_params(run.params, ppgn.hidden, ppgn.num_blocks)}
        rho = float(getattr(run.process, "rho", 0.5))
        apply = jax.jit(lambda p, adj, lv: run.model.apply(
            p, adj, jnp.asarray(mask), jnp.zeros((b,), jnp.int32), lv))
        for level in LEVELS:
            lv = jnp.full((b,), level, jnp.float32)
            adj_t = bitflip.q_sample(jax.random.key(int(level * 1000)), jnp.asarray(adj0),
                                     jnp.asarray(mask), lv, rho)
            for arm, params in arms.items():
                logits[(dtype, arm, level)] = np.asarray(apply(params, adj_t, lv), np.float64)
    rows = []
    for (dtype, arm, level), lg in sorted(logits.items(), key=lambda kv: (kv[0][2], kv[0][:2])):
        diff = (lg - logits[("float32", "trained", level)])[pairs]
        prob = 1.0 / (1.0 + np.exp(-lg[pairs]))
        rows.append({"level": level, "dtype": dtype, "weights": arm,
                     "density_ratio": float(prob.sum() / adj0[pairs].sum()),
                     "bce": float(np.mean(np.logaddexp(0, lg[pairs]) - adj0[pairs] * lg[pairs])),
                     "rms_vs_f32": float(np.sqrt(np.mean(diff ** 2))),
                     "mean_shift_vs_f32": float(diff.mean())})
        r = rows[-1]
        print(f"{level:5.2f} {dtype:9s} {arm:8s} density {r['density_ratio']:.4f} "
              f"bce {r['bce']:.5f} rms {r['rms_vs_f32']:.4f} shift {r['mean_shift_vs_f32']:+.4f}")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"workdir": a.workdir, "checkpoint": a.checkpoint, "data": a.data,
                       "node_counts": [g.number_of_nodes() for g in graphs], "rows": rows},
                      fh, indent=1)


if __name__ == "__main__":
    main()
