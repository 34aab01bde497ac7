#!/usr/bin/env bash
# Round 27 (issue 13), second call, one GPU (~5 min): the deliverable-scale samples
# (benchmarks/vun_eval.py: 5 sampling seeds x 40 graphs, as every SBM row) of the arms the
# first call's pilot ranked highest (training-split node counts; no test graph read to
# choose them), beside same-call controls, all from round 24's h64b8 best_val (EMA):
#   ctrl         unguided, 64 steps (the recipe's sampler: power:3, logit scale 0.9)
#   ctrl128      unguided, 128 steps: as many network passes as a guided 64-step chain
#   each ARMS entry NAME:GUIDE:WEIGHT, guided by $GUIDES/GUIDE (latest, EMA) at 64 steps
# Then our SBM fit of every arm's 200 graphs on the host's CPUs (benchmarks/sbm_failures.py).
# $OUT/results.tar.gz: res/samples (graph lists, *_vun.json), res/fail (fits), logs.
# Usage: ARMS="g32e500_w1:g32e500:1 ..." GUIDES=DIR bash benchmarks/calls/round27_vun.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-540}
GOOD=${GOOD:-.devdata/r24/h64b8}
GUIDES=${GUIDES:-.devdata/r27/guides}
S="${SAMPLES:---seeds 5 --num_samples 40}"
mkdir -p "$OUT/res/samples" "$OUT/res/fail"
common="--workdir $GOOD --checkpoint best_val --ema --validity none --protocol none $S \
 --out $OUT/res/samples"
pids=(); names=()
python benchmarks/vun_eval.py $common --num_steps ${STEPS:-64} --name r27_ctrl \
  > "$OUT/res/vun_ctrl.log" 2>&1 &
pids+=($!); names+=(r27_ctrl)
python benchmarks/vun_eval.py $common --num_steps $(( 2 * ${STEPS:-64} )) --name r27_ctrl128 \
  > "$OUT/res/vun_ctrl128.log" 2>&1 &
pids+=($!); names+=(r27_ctrl128)
for spec in ${ARMS}; do
  IFS=: read -r name guide weight <<< "$spec"
  python benchmarks/vun_eval.py $common --num_steps ${STEPS:-64} --name r27_$name \
    --guide $GUIDES/$guide --guide_checkpoint latest --guidance $weight \
    > "$OUT/res/vun_$name.log" 2>&1 &
  pids+=($!); names+=(r27_$name)
done
stop_at $(( HARD - 90 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
fits=()
for name in "${names[@]}"; do
  files=$(ls $OUT/res/samples/${name}_seed*.json 2>/dev/null)
  [ -n "$files" ] && python benchmarks/sbm_failures.py --reference spectre_sbm:test \
    --generated $files --fit ddgjax --out $OUT/res/fail/$name > $OUT/res/fail/$name.log 2>&1 &
  fits+=($!)
done
stop_at $(( HARD - 10 )) "${fits[@]}"
grep -H "^generated" $OUT/res/fail/*.log
pack_results
