#!/usr/bin/env bash
# Round 14, call 4 (one GPU): the round-14 training variants' best_val checkpoints
# (carried as .devdata/r14ck/ckpt_NAME.tar.gz from round14_sbm_variants.sh PACK_BEST)
# sampled with the config's own grid, power:3, logit scale 0.9: 5 seeds x 40 graphs at 64
# steps, graphs only (graph-tool on a CPU after). Stops by $HARD_SECONDS.
# Usage: bash benchmarks/calls/round14_call4.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
mkdir -p runs/r14c "$OUT/res/samples"
shopt -s nullglob
pids=()
for t in .devdata/r14ck/ckpt_*.tar.gz; do
  tar xzf $t -C runs/r14c
  name=$(basename $t .tar.gz); name=${name#ckpt_}
  python benchmarks/vun_eval.py --workdir runs/r14c/$name --checkpoint best_val --ema \
    --validity none --protocol none --seeds 5 --num_samples 40 --num_steps 64 \
    --option logit_scale=0.9 --option grid=power:3 --name sbm14_${name}_p3 \
    --out "$OUT/res/samples" > "$OUT/res/vun_${name}_p3.log" 2>&1 &
  pids+=($!)
done
stop_at ${HARD_SECONDS:-170} "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
pack_results
