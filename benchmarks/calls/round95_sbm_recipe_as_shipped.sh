#!/usr/bin/env bash
# Round 95 (issue 13; session 38), one H200 (~8 min): the SPECTRE SBM recipe as it ships now
# (configs/best.py:spectre_sbm, which pads the 187-node bucket to 192 since session 37:
# pad_multiple = 32), trained whole (2000 epochs, validation every 500, training seed 0, the
# deliverable's seed) in one fresh process, then its best_val (EMA) sampled 5 seeds x 40
# graphs at 64 steps (the config's sampler) and, in parallel, at 1024 steps without the
# logit scale (the deliverable's T1024 row). Does the shipped recipe land where the
# deliverable (trained without the padding) and rounds 54-55's ten seeds did? Score on the
# CPU with graph-tool's fit:
#   python benchmarks/check_samples.py --data spectre_sbm --protocol spectre --validity sbm \
#       R/r95_T64_seed{0,1,2,3,4}.json (and r95_T1024_*)
#   bash benchmarks/calls/round95_sbm_recipe_as_shipped.sh OUT
set -u
OUT=${1:?OUT}
S=/tmp/r95/out
mkdir -p "$S/samples"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$S/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$S/times.txt"; }
W=/tmp/r95/sbm
timeout ${TRAIN_SECONDS:-400} python3 train.py --config configs/best.py:spectre_sbm --workdir $W \
  --quiet > "$S/train.log" 2>&1
stamp train $?
cp $W/metrics.jsonl "$S/metrics.jsonl" 2>/dev/null
cp $W/config.json "$S/config.json" 2>/dev/null
( XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 timeout ${SAMPLE_SECONDS:-160} python3 benchmarks/vun_eval.py \
    --workdir $W --checkpoint best_val --ema --validity none --protocol none --seeds 5 \
    --num_samples 40 --num_steps 64 --name r95_T64 --out "$S/samples" \
    > "$S/vun_T64.log" 2>&1; stamp sample_T64 $? ) &
( XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 timeout ${SAMPLE_SECONDS:-160} python3 benchmarks/vun_eval.py \
    --workdir $W --checkpoint best_val --ema --validity none --protocol none --seeds 5 \
    --num_samples 40 --num_steps 1024 --option logit_scale=1.0 --name r95_T1024 \
    --out "$S/samples" > "$S/vun_T1024.log" 2>&1; stamp sample_T1024 $? ) &
wait
tar czf "$OUT/r95.tar.gz" -C "$S" .
tar czf "$OUT/ckpt.tar.gz" -C /tmp/r95 sbm/config.json sbm/dataset.json sbm/checkpoints/best_val
cat "$S/times.txt"; ls -la "$OUT"; grep -v '"loss"' "$S/metrics.jsonl" | tail -6
