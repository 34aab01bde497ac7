#!/usr/bin/env bash
# Round 26 (issue 12), one GPU (~4 min): does XLA's GEMM autotuning make the cold
# Ego-small run miss the 20 s target? Round 20 measured 25.1 s cold against 17.2 s with a
# warm compile cache; the first call (compiling) took 7.5 s cold against 1.4 s warm. Each
# phase a fresh process, no persistent compile cache:
#   default      python benchmarks/seeds_speed.py --skip_multi          (one run, as round 20)
#   at0          the same with XLA_FLAGS=--xla_gpu_autotune_level=0     (no autotuning)
#   at0_seeds5   five seeds in one program (--skip_single --seeds 5) with autotuning off
#   default2     the default again (order effects)
#   seeds5       five seeds, default flags (the ratio's baseline in this call)
# $OUT/compile.tar.gz (JSONs and logs).
# Usage: bash benchmarks/calls/round26_compile.sh OUT
set -uo pipefail
OUT=$1; mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
unset JAX_COMPILATION_CACHE_DIR
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
run() {  # NAME FLAGS ARGS...
  local name=$1 flags=$2; shift 2
  XLA_FLAGS="$flags" timeout 150 python benchmarks/seeds_speed.py "$@" --out "$OUT/res/$name.json" \
    > "$OUT/res/$name.log" 2>&1
  echo "$name rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
}
run default "" --skip_multi
run at0 "--xla_gpu_autotune_level=0" --skip_multi
run at0_seeds5 "--xla_gpu_autotune_level=0" --skip_single --seeds 5
run default2 "" --skip_multi
run seeds5 "" --skip_single --seeds 5
tar czf "$OUT/compile.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
