"""Whether the one-accumulator mixing kernel would round any column of a trained PPGN's
mixing weights differently (``pair_mlp_mgpu.mixing_fp8_column_scales`` against
``fp8_column_scales``): per workdir and checkpoint, the mixing columns, how many would have
their float8 scale raised, and the smallest ratio of a column's largest ``|wx|`` to its
largest ``|wp|`` (a scale is raised below ~1/146).

    python benchmarks/fp8_mixing_columns.py WORKDIR [WORKDIR ...]

CPU is enough (it reads parameters only).
"""
from __future__ import annotations

import argparse
import json

import jax
import numpy as np


def columns(params) -> dict:
    """The counts for one parameter tree: every ``.../mix/kernel`` (``[C + H, H]``: the
    ``x`` rows, then the product's ``H`` rows)."""
    from ddgjax.models import pair_mlp_mgpu as pm

    n_cols = n_raised = 0
    smallest = float("inf")
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        name = "/".join(str(getattr(k, "key", k)) for k in path)
        if not name.endswith("mix/kernel"):
            continue
        k = np.asarray(leaf, np.float32)
        wx, wp = k[:k.shape[0] - k.shape[1]], k[k.shape[0] - k.shape[1]:]
        own = np.asarray(pm.fp8_column_scales(wx))
        joint = np.asarray(pm.mixing_fp8_column_scales(wx, wp))
        n_cols += own.size
        n_raised += int((own != joint).sum())
        smallest = min(smallest, float((np.abs(wx).max(0) / np.abs(wp).max(0)).min()))
    return {"mixing_columns": n_cols, "raised": n_raised, "smallest_ratio": smallest}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdirs", nargs="+")
    ap.add_argument("--checkpoints", default="latest,best_val")
    args = ap.parse_args(argv)
    from ddgjax import trained
    from ddgjax.sampling import SamplingError

    for wd in args.workdirs:
        for ck in args.checkpoints.split(","):
            for ema in (False, True):
                try:
                    run = trained.load(wd, ck, use_ema=ema)
                except SamplingError as e:   # no such checkpoint or no EMA in it
                    print(json.dumps({"workdir": wd, "checkpoint": ck, "ema": ema,
                                      "skipped": str(e)[:120]}))
                    continue
                print(json.dumps({"workdir": wd, "checkpoint": ck, "ema": ema,
                                  **columns(run.run.params)}))


if __name__ == "__main__":
    main()
