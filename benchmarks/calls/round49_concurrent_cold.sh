#!/usr/bin/env bash
# Round 49 (issue 12), one H200: Ego-small cold with XLA's CONCURRENT command-buffer
# scheduling alone (round 48: the steady step 0.78 -> 0.62 ms in chunks), more runs.
#   bash benchmarks/calls/round49_concurrent_cold.sh OUT
# 1. one run cold (seeds_speed.py --skip_multi), default and CONCURRENT alternating, 3 each;
# 2. five seeds in one program (vmapped), CONCURRENT;
# 3. EDP-GNN Ego-small chunks, wall clock, default and CONCURRENT.
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
CON="--xla_gpu_command_buffer_scheduling_mode=CONCURRENT"
for i in 1 2 3; do
  for name in default concurrent; do
    flags=""; [ "$name" = concurrent ] && flags="$CON"
    XLA_FLAGS="$flags" timeout 50 python3 benchmarks/seeds_speed.py --skip_multi $BF \
      --out "$OUT/cold_${name}_$i.json" > "$OUT/cold_${name}_$i.log" 2>&1
  done
done
XLA_FLAGS="$CON" timeout 90 python3 benchmarks/seeds_speed.py --skip_single $BF \
  --out "$OUT/cold_concurrent_seeds5.json" > "$OUT/cold_concurrent_seeds5.log" 2>&1
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
for name in default concurrent; do
  flags=""; [ "$name" = concurrent ] && flags="$CON"
  XLA_FLAGS="$flags" timeout 60 python3 benchmarks/seeds_profile.py --wall \
    --config ego_small_edp_simple --out "$OUT/sp_edp_$name" --rows one --calls 5 \
    --option=model.compute_dtype=bfloat16 2>&1 | grep -E '^\{|rror' | sed "s/^/edp $name /"
done
