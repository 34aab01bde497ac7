#!/usr/bin/env bash
# Issue 12: the Ego-small paper config trained by the CLI (`train.py`, what a user runs),
# twice, each in a fresh workdir, with one fresh compile cache (DDGJAX_COMPILE_CACHE):
# the first run compiles and fills the cache, the second loads its programs from it.
# Writes OUT/res/cli_rerun.txt (process wall seconds per run) and the runs' logs.
# Usage: bash benchmarks/calls/cli_rerun.sh OUT [CONFIG]
set -uo pipefail
OUT=$1
CONFIG=${2:-ego_small_ppgn_simple}
mkdir -p "$OUT/res"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/res/gpu.txt" 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
unset JAX_COMPILATION_CACHE_DIR JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS
export DDGJAX_COMPILE_CACHE=$(mktemp -d /tmp/ddgjax_cli_cache.XXXX)
for run in cold warm; do
  wd=$(mktemp -d /tmp/ddgjax_cli_run.XXXX)
  t0=$(date +%s.%N)
  python train.py --config "$CONFIG" --workdir "$wd" > "$OUT/res/cli_$run.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  echo "$run rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 2))") cache_entries=$(ls "$DDGJAX_COMPILE_CACHE" | wc -l)" \
    | tee -a "$OUT/res/cli_rerun.txt"
done
tar czf "$OUT/results.tar.gz" -C "$OUT" res
