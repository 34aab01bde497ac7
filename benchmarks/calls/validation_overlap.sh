#!/usr/bin/env bash
# Session 15's background validation scoring, timed (issue 13's training time): the SPECTRE
# SBM recipe (configs/best.py:spectre_sbm, size buckets, validation by SBM validity on 128
# samples) for $EPOCHS epochs (default 750, validation every 250: three validations) with
# this checkout's code on GPU 0 and, at the same time, with the code before the change
# (a copy in .baseline/, e.g. `git archive b2a6e0f | tar x -C .baseline`; carry it) on
# GPU 1. Both runs use the same seed, so their validation records should agree (the
# selection is the same; only when it is recorded differs). Compare the CLI's
# "trained ... in S s" (train_*.log) and the end record's validation_seconds
# (metrics_*.jsonl). $OUT/overlap.tar.gz.
# CONFIG replaces the config (a CPU dry run: configs/test.py with EXTRA overrides).
# Usage: bash benchmarks/calls/validation_overlap.sh OUT
set -uo pipefail
OUT=$1; G=/tmp/overlap; mkdir -p $G
export XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > $G/gpu.txt 2>&1
ARGS=(--config ${CONFIG:-configs/best.py:spectre_sbm} --quiet --config.train.num_epochs=${EPOCHS:-750}
      --config.validation.every_epochs=250 --config.train.checkpoint_every_epochs=50 ${EXTRA:-})
root=$(pwd)
run() {  # NAME GPU DIR
  local t0=$(date +%s%N)
  ( cd "$3" && CUDA_VISIBLE_DEVICES=$2 timeout ${TRAIN_SECONDS:-500} python train.py \
      --workdir "$root/runs/overlap_$1" "${ARGS[@]}" ) > $G/train_$1.log 2>&1
  echo "$1 train rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $G/times.txt
  cp runs/overlap_$1/metrics.jsonl $G/metrics_$1.jsonl 2>/dev/null
}
rm -rf runs/overlap_new runs/overlap_old
run new 0 . &
if [ -d .baseline/ddgjax ]; then run old 1 .baseline & else echo "no .baseline/: old skipped" >> $G/times.txt; fi
wait
tar czf "$OUT/overlap.tar.gz" -C /tmp overlap; cat $G/times.txt
