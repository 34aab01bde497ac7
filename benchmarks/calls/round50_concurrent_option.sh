#!/usr/bin/env bash
# Round 50 (issue 12), one H200: config.train.concurrent_kernels (XLA's CONCURRENT kernel
# schedule as jax.jit compiler_options of the training chunks only).
#   bash benchmarks/calls/round50_concurrent_option.sh OUT
# 1. Ego-small cold (seeds_speed.py), off / on alternating, two each; five seeds on;
# 2. wall ms per step of 50-step chunks (seeds_profile.py --wall --rows one), off / on, for
#    the other small paper configs: Community-small and SBM-27 (PPGN 6x32), EDP-GNN Ego-small.
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
ON="--option=train.concurrent_kernels=true"
for i in 1 2; do
  timeout 50 python3 benchmarks/seeds_speed.py --skip_multi $BF --out "$OUT/cold_off_$i.json" \
    > "$OUT/cold_off_$i.log" 2>&1
  timeout 50 python3 benchmarks/seeds_speed.py --skip_multi $BF $ON \
    --out "$OUT/cold_on_$i.json" > "$OUT/cold_on_$i.log" 2>&1
done
timeout 80 python3 benchmarks/seeds_speed.py --skip_single $BF $ON \
  --out "$OUT/cold_on_seeds5.json" > "$OUT/cold_on_seeds5.log" 2>&1
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "cold_*.json"))):
    d = json.load(open(f))
    for k in ("single", "multi"):
        if k in d:
            r = d[k]
            print(os.path.basename(f), k, *(f"{x}={r[x]:.3f}" for x in
                  ("total_s", "setup_s", "loop_s", "first_call_s", "ms_per_step")))
PY
for spec in "community_small_ppgn_simple 20 $BF" "sbm_27_ppgn_simple 27 $BF" \
            "ego_small_edp_simple 18 --option=model.compute_dtype=bfloat16"; do
  set -- $spec; cfg=$1; n=$2; shift 2
  for opt in "" "$ON"; do
    timeout 45 python3 benchmarks/seeds_profile.py --wall --config $cfg --nodes $n \
      --out "$OUT/sp" --rows one --calls 5 "$@" $opt 2>&1 | grep -E '^\{|rror' \
      | sed "s/^/$cfg ${opt:+on} /" | tee -a "$OUT/chunks.txt"
  done
done
