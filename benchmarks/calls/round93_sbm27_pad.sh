#!/usr/bin/env bash
# Round 93 (issue 12's small models; session 37), one H200 (~4 min): the SBM-27 paper config
# (PPGN 6x32, 27 nodes, 5000 epochs) in bf16 with fused blocks, with
# config.model.ppgn.pad_multiple = 1 and 4 (27 -> 28 nodes inside the model; round 90: the
# step 1.23 -> 1.02 ms), training seed 0, fresh processes, checkpoint only at the end; then
# 1024 graphs (32 steps, sampling seed 0) from each run's latest. Score on the CPU:
#   python benchmarks/check_samples.py --data sbm_27 --protocol paper OUT/res/pad{1,4}/samples.json
#   bash benchmarks/calls/round93_sbm27_pad.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
for m in 1 4; do
  s=$(date +%s)
  timeout ${LIMIT:-100} python3 train.py --config configs/paper.py:sbm_27,ppgn,simple \
    --workdir /tmp/r93/pad$m --quiet --config.model.compute_dtype=bfloat16 \
    --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=5000 \
    --config.model.ppgn.pad_multiple=$m > "$OUT/res/train_pad$m.log" 2>&1
  echo "train pad$m rc=$? process $(( $(date +%s) - s )) s" >> "$OUT/res/times.txt"
done
for m in 1 4; do
  timeout ${SAMPLE_LIMIT:-60} python3 sample.py --workdir /tmp/r93/pad$m --checkpoint latest \
    --num_samples 1024 --seed 0 --protocol none --out "$OUT/res/pad$m" > "$OUT/res/sample_pad$m.log" 2>&1
  echo "sample pad$m rc=$?" >> "$OUT/res/times.txt"
  rm -f "$OUT/res/pad$m/grid.png"
done
python3 - > "$OUT/res/summary.txt" 2>&1 <<'PY'
import glob, json
for f in sorted(glob.glob("/tmp/r93/pad*/metrics.jsonl")):
    ends = [r for r in map(json.loads, open(f)) if r.get("event") == "end"]
    if ends:
        e = ends[-1]
        print(f, {k: (round(e[k], 2) if isinstance(e.get(k), float) else e.get(k))
                  for k in ("epochs", "steps", "seconds", "first_call_seconds", "chunk_seconds")})
PY
cat "$OUT/res/times.txt" "$OUT/res/summary.txt"
