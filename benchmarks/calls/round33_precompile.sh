#!/usr/bin/env bash
# Round 33 (issue 12): the Ego-small paper config, cold (no compile cache), with the first
# training chunk compiled in the background during set-up (train.precompile=true, the
# default) and without it, each in a fresh process, alternating; bf16 + fused blocks twice,
# float32 once; five seeds in one program (bf16 + fused); and the CLI as a user runs it.
# Usage: bash benchmarks/calls/round33_precompile.sh OUT
set -uo pipefail
OUT=${1:?OUT}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
unset JAX_COMPILATION_CACHE_DIR JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"
t0=$(date +%s)
one() {  # NAME ARGS...
  local name=$1; shift
  timeout 150 python3 benchmarks/seeds_speed.py "$@" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
}
for rep in 1 2; do
  one "bf_on_$rep" --skip_multi $BF --option train.precompile=true
  one "bf_off_$rep" --skip_multi $BF --option train.precompile=false
done
one f32_on --skip_multi --option train.precompile=true
one f32_off --skip_multi --option train.precompile=false
one bf_seeds5_on --skip_single --seeds 5 $BF --option train.precompile=true
export DDGJAX_COMPILE_CACHE=none
wd=$(mktemp -d /tmp/ddgjax_cli_run.XXXX); t1=$(date +%s.%N)
timeout 120 python3 train.py --config ego_small_ppgn_simple --workdir "$wd" > "$OUT/cli_f32.log" 2>&1
echo "cli_f32 rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N) - $t1, 2))")" | tee -a "$OUT/times.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    d = json.load(open(f))
    for ph in ("single", "multi"):
        if ph in d:
            p = d[ph]
            print(os.path.basename(f), ph, {k: round(p[k], 3) for k in ("total_s", "process_s", "setup_s", "first_call_s", "compile_s", "ms_per_step") if k in p})
PY
