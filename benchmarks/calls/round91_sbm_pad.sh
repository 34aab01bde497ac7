#!/usr/bin/env bash
# Round 91 (issue 13's training time; session 37), one H200 (~6 min): the SBM recipe
# (best_spectre_sbm: buckets 64,96,128,187) with config.model.ppgn.pad_multiple = 1 and 32
# (the 187-node bucket's blocks run on 192 nodes; rounds 89-90: that step 1.6x faster),
# fresh processes, ${EPOCHS:-250} epochs, no validation, checkpoints every 50; each run's end
# record gives the loop's seconds, the first call's (compile) and the rest (steady epochs).
# Then 5 x 40 graphs at 64 steps from each run's latest (vun_eval --one_request), timed.
#   bash benchmarks/calls/round91_sbm_pad.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
COMMON="--config best_spectre_sbm --config.train.num_epochs=${EPOCHS:-250} --config.validation.every_epochs=0 --config.train.checkpoint_every_epochs=50"
for m in 1 32; do
  s=$(date +%s)
  timeout ${LIMIT:-170} python3 train.py $COMMON --config.model.ppgn.pad_multiple=$m \
    --workdir /tmp/r91/pad$m > "$OUT/res/train_pad$m.log" 2>&1
  echo "train pad$m rc=$? process $(( $(date +%s) - s )) s" >> "$OUT/res/times.txt"
done
for m in 1 32; do
  s=$(date +%s)
  timeout ${SAMPLE_LIMIT:-60} python3 benchmarks/vun_eval.py --workdir /tmp/r91/pad$m \
    --checkpoint latest --ema --validity none --protocol none --seeds 5 --one_request \
    --num_samples 40 --num_steps 64 --name r91_pad$m --out /tmp/r91/samples \
    > "$OUT/res/sample_pad$m.log" 2>&1
  echo "sample pad$m rc=$? process $(( $(date +%s) - s )) s" >> "$OUT/res/times.txt"
done
python3 - > "$OUT/res/summary.txt" 2>&1 <<'PY'
import glob, json
for f in sorted(glob.glob("/tmp/r91/pad*/metrics.jsonl")):
    ends = [r for r in map(json.loads, open(f)) if r.get("event") == "end"]
    if ends:
        e = ends[-1]
        print(f, {k: (round(e[k], 2) if isinstance(e.get(k), float) else e.get(k))
                  for k in ("epochs", "steps", "seconds", "first_call_seconds", "chunk_seconds",
                            "checkpoint_seconds")})
PY
cat "$OUT/res/times.txt" "$OUT/res/summary.txt"
