#!/usr/bin/env bash
# Round 27 (issue 13), second call, one GPU (~7 min). The first call
# (round27_autoguidance.sh) found that autoguidance of h64b8 fixes block sizes (size
# failures 22.5 % -> 5-9 %) but draws too few inter-community edges (Wald failures
# 6 % -> 21-31 %, fitted p_inter ~0.003). Guidance only in the noisier steps (a guidance
# interval, Kynkaanniemi et al. 2024), where the partition forms, leaving the last steps
# to the good model alone, might keep the first and lose the second. Guides: the first
# call's g64e250 and g32e500 (latest, EMA), carried in $GUIDES.
#  1. pilot (benchmarks/sbm_grid_pilot.py, training-split node counts 44-187, 40 counts x
#     sampling seeds 0 and 1, our fit; no test graph read), two processes side by side:
#       a: ctrl, g64e250 at w = 1 above beta_bar 0.05 / 0.1 / 0.2, w = 2 above 0.1 / 0.2
#       b: g32e500 at w = 0.5 / 1 above 0.1, w = 1 / 2 above 0.2
#  2. the two guided arms with the highest pilot validity (ties: the first listed), then
#     5 sampling seeds x 40 graphs each (benchmarks/vun_eval.py, as every SBM row), beside
#     ctrl (64 steps) and ctrl128 (128 steps: as many network passes as a guided chain)
#  3. our SBM fit of each 5 x 40 set (benchmarks/sbm_failures.py) on the host's CPUs.
# $OUT/results.tar.gz: res/pilot, res/samples, res/fail, logs.
# CPU dry run knobs: PILOT, SAMPLES, STEPS (default 64), PILOT_STOP, HARD_SECONDS.
# Usage: bash benchmarks/calls/round27_interval.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-570}
GOOD=${GOOD:-.devdata/r24/h64b8}
GUIDES=${GUIDES:-.devdata/r27/guides}
mkdir -p "$OUT/res/pilot" "$OUT/res/samples" "$OUT/res/fail"
PILOT_ARGS="--workdir $GOOD --checkpoint best_val --ema --guide_checkpoint latest --fit ddgjax \
 ${PILOT:---nodes 44-187 --num 40 --seeds 0,1}"
python benchmarks/sbm_grid_pilot.py $PILOT_ARGS --guide g64e250=$GUIDES/g64e250 \
  --arms "ctrl:;g64e250_w1_a0.05:guide=g64e250,guidance=1,guidance_above=0.05;g64e250_w1_a0.1:guide=g64e250,guidance=1,guidance_above=0.1;g64e250_w1_a0.2:guide=g64e250,guidance=1,guidance_above=0.2;g64e250_w2_a0.1:guide=g64e250,guidance=2,guidance_above=0.1;g64e250_w2_a0.2:guide=g64e250,guidance=2,guidance_above=0.2" \
  --out "$OUT/res/pilot/a" > "$OUT/res/pilot_a.log" 2>&1 &
pa=$!
python benchmarks/sbm_grid_pilot.py $PILOT_ARGS --guide g32e500=$GUIDES/g32e500 \
  --arms "g32e500_w0.5_a0.1:guide=g32e500,guidance=0.5,guidance_above=0.1;g32e500_w1_a0.1:guide=g32e500,guidance=1,guidance_above=0.1;g32e500_w1_a0.2:guide=g32e500,guidance=1,guidance_above=0.2;g32e500_w2_a0.2:guide=g32e500,guidance=2,guidance_above=0.2" \
  --out "$OUT/res/pilot/b" > "$OUT/res/pilot_b.log" 2>&1 &
pb=$!
stop_at ${PILOT_STOP:-300} $pa $pb
echo "pilots done at $(elapsed) s" >> "$OUT/res/times.txt"
# the two guided arms with the highest pilot validity, as NAME:GUIDE:WEIGHT:ABOVE
ARMS=$(python - "$OUT/res/pilot" <<'PY'
import json, os, sys
arms = []
for part in ("a", "b"):
    path = os.path.join(sys.argv[1], part + ".json")
    if os.path.exists(path):
        for name, arm in json.load(open(path))["arms"].items():
            o = arm["options"]
            if "guide" in o and arm["summary"]:
                arms.append((-arm["summary"]["valid"], len(arms), name, o))
print(" ".join(f"{n}:{o['guide']}:{o['guidance']}:{o['guidance_above']}"
               for _, _, n, o in sorted(arms)[:2]))
PY
)
echo "chosen: $ARMS" >> "$OUT/res/times.txt"
S="${SAMPLES:---seeds 5 --num_samples 40}"
common="--workdir $GOOD --checkpoint best_val --ema --validity none --protocol none $S \
 --out $OUT/res/samples"
pids=(); names=()
python benchmarks/vun_eval.py $common --num_steps ${STEPS:-64} --name r27_ctrl > "$OUT/res/vun_ctrl.log" 2>&1 &
pids+=($!); names+=(r27_ctrl)
python benchmarks/vun_eval.py $common --num_steps $(( 2 * ${STEPS:-64} )) --name r27_ctrl128 \
  > "$OUT/res/vun_ctrl128.log" 2>&1 &
pids+=($!); names+=(r27_ctrl128)
for spec in $ARMS; do
  IFS=: read -r name guide weight above <<< "$spec"
  python benchmarks/vun_eval.py $common --num_steps ${STEPS:-64} --name r27_$name \
    --guide $GUIDES/$guide --guide_checkpoint latest --guidance $weight --guidance_above $above \
    > "$OUT/res/vun_$name.log" 2>&1 &
  pids+=($!); names+=(r27_$name)
done
stop_at $(( HARD - 60 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
fit_sets $(( HARD - 10 )) "${names[@]}"
pack_results
