#!/usr/bin/env bash
# Round 34 (issue 12): the parameter init jitted on the host CPU (one program instead of
# ~90 op-by-op compiles) on top of round 33's background compile: set-up profiles of both
# inits, then the Ego-small paper config cold (bf16 + fused twice, float32, five seeds),
# and the CLI as a user runs it, no compile cache.
# Usage: bash benchmarks/calls/round34_setup.sh OUT
set -uo pipefail
OUT=${1:?OUT}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
unset JAX_COMPILATION_CACHE_DIR JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"
t0=$(date +%s)
for v in eager hostop; do
  timeout 100 python3 benchmarks/setup_profile.py --init $v --out "$OUT/setup_$v.json" > /dev/null 2>&1
  echo "setup_$v rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
done
one() {  # NAME ARGS...
  local name=$1; shift
  timeout 150 python3 benchmarks/seeds_speed.py "$@" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
}
one bf_1 --skip_multi $BF
one f32 --skip_multi
one bf_2 --skip_multi $BF
one bf_seeds5 --skip_single --seeds 5 $BF
export DDGJAX_COMPILE_CACHE=none
wd=$(mktemp -d /tmp/ddgjax_cli_run.XXXX); t1=$(date +%s.%N)
timeout 120 python3 train.py --config ego_small_ppgn_simple --workdir "$wd" > "$OUT/cli_f32.log" 2>&1
echo "cli_f32 rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N) - $t1, 2))")" | tee -a "$OUT/times.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    d = json.load(open(f))
    if "parts_s" in d:
        print(os.path.basename(f), {k: round(v, 3) for k, v in d["parts_s"].items()}, "compiles", d["num_compiles"], round(d["compile_s"], 3))
    for ph in ("single", "multi"):
        if ph in d:
            p = d[ph]
            print(os.path.basename(f), ph, {k: round(p[k], 3) for k in ("total_s", "process_s", "setup_s", "first_call_s", "compile_s", "ms_per_step") if k in p}, p.get("best_loss_by_seed"))
PY
cd "$OUT" && tar czf all.tgz *.json *.log times.txt summary.txt gpu.txt && mkdir keep && mv all.tgz summary.txt keep/ && rm -f *.json *.log && mv keep/* . && rmdir keep
