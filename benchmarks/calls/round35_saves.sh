#!/usr/bin/env bash
# Round 35 (issue 12): queued checkpoint saves (this code) against the code before them
# (carried as .baseline/, commit 0aa442f), alternating, each a fresh process, no compile
# cache: the Ego-small paper config in bf16 + fused blocks (one run, twice each), float32
# (one run) and five seeds in one program (bf16 + fused); the CLI as a user runs it.
# Usage: bash benchmarks/calls/round35_saves.sh OUT
set -uo pipefail
OUT=${1:?OUT}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
unset JAX_COMPILATION_CACHE_DIR JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BF="--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"
ROOT=$(pwd); t0=$(date +%s)
one() {  # DIR NAME ARGS...
  local dir=$1 name=$2; shift 2
  (cd "$dir" && timeout 150 python3 benchmarks/seeds_speed.py "$@" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1)
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
}
one "$ROOT" bf_new_1 --skip_multi $BF
one "$ROOT/.baseline" bf_base_1 --skip_multi $BF
one "$ROOT" bf_new_2 --skip_multi $BF
one "$ROOT/.baseline" bf_base_2 --skip_multi $BF
one "$ROOT" f32_new --skip_multi
one "$ROOT" seeds5_new --skip_single --seeds 5 $BF
one "$ROOT/.baseline" seeds5_base --skip_single --seeds 5 $BF
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
            print(os.path.basename(f), ph, {k: round(p[k], 3) for k in ("total_s", "process_s", "setup_s", "first_call_s", "checkpoint_s", "ms_per_step") if k in p}, p.get("best_loss_by_seed"))
PY
cd "$OUT" && tar czf all.tgz *.json *.log times.txt summary.txt gpu.txt && mkdir keep && mv all.tgz summary.txt keep/ && rm -f *.json *.log && mv keep/* . && rmdir keep
