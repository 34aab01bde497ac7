"""The range of each PPGN block's mixing-layer output ``y`` (before the instance norm), which
``DDGJAX_FP8_ACTIVATIONS=weights_y`` stores in float8 e4m3 (less the bias, unscaled,
saturating at +-448): per block, ``|y|``'s median, 99th percentile and maximum over the
real entries, the maxima on and off the diagonal, and the fraction beyond 448. CPU, XLA,
float32, on the largest test graphs noised to three levels.

    python benchmarks/mix_output_range.py --workdir W [--checkpoint best_val --ema] \
        --data spectre_sbm [--graphs 4] [--out F.json]
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
from ddgjax.models import ppgn  # noqa: E402
from ddgjax.processes import bitflip  # noqa: E402
from ddgjax.sampling import load_run  # noqa: E402

FP8_MAX = 448.0
LEVELS = (0.05, 0.3, 0.45)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--checkpoint", default="best_val", choices=["latest", "best", "best_val"])
    ap.add_argument("--ema", action="store_true")
    ap.add_argument("--data", required=True)
    ap.add_argument("--graphs", type=int, default=4)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    graphs = sorted(load_dataset(a.data).test, key=lambda g: -g.number_of_nodes())[:a.graphs]
    n, b = max(g.number_of_nodes() for g in graphs), len(graphs)
    adj0, mask = np.zeros((b, n, n), np.float32), np.zeros((b, n), bool)
    for i, g in enumerate(graphs):
        k = g.number_of_nodes()
        adj0[i, :k, :k] = nx.to_numpy_array(g, nodelist=sorted(g.nodes()))
        mask[i, :k] = True
    seen = []
    block_norm = ppgn.block_norm

    def recording_norm(y, mask_sq, *args, **kw):       # y [B, N, N, h] before the norm
        def record(yv, m):
            yv, m = np.abs(np.asarray(yv, np.float64)), np.asarray(m)
            eye = np.eye(yv.shape[1], dtype=bool)[None]
            real = yv[m]
            seen.append({"median": float(np.median(real)),
                         "q99": float(np.quantile(real, 0.99)), "max": float(real.max()),
                         "max_diagonal": float(yv[m & eye].max()),
                         "max_off_diagonal": float(yv[m & ~eye].max()),
                         "beyond_448": float((real > FP8_MAX).mean())})
        jax.debug.callback(record, y, mask_sq)
        return block_norm(y, mask_sq, *args, **kw)

    ppgn.block_norm = recording_norm                  # this process only
    run = load_run(a.workdir, a.checkpoint, use_ema=a.ema or None, compute_dtype="float32",
                   pallas=False)
    rows = []
    for level in LEVELS:
        lv = jnp.full((b,), level, jnp.float32)
        adj_t = bitflip.q_sample(jax.random.key(1), jnp.asarray(adj0), jnp.asarray(mask), lv,
                                 float(getattr(run.process, "rho", 0.5)))
        seen.clear()
        run.model.apply(run.params, adj_t, jnp.asarray(mask), jnp.zeros((b,), jnp.int32), lv)
        jax.effects_barrier()
        for k, r in enumerate(seen):
            rows.append({"level": level, "block": k, **r})
            print(f"level {level:.2f} block {k}: |y| median {r['median']:.3f} q99 {r['q99']:.2f} "
                  f"max {r['max']:.1f} (diagonal {r['max_diagonal']:.1f}, off "
                  f"{r['max_off_diagonal']:.1f}), beyond 448: {r['beyond_448']:.1e}")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"workdir": a.workdir, "data": a.data,
                       "node_counts": [g.number_of_nodes() for g in graphs], "rows": rows},
                      fh, indent=1)


if __name__ == "__main__":
    main()
