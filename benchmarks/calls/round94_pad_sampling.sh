#!/usr/bin/env bash
# Round 94 (issues 12 and 13; session 38), one H200 (~8 min), fresh processes throughout:
#  a) the sampling override `ddgjax-sample --pad_multiple 32` on an SBM recipe run trained
#     without padding (pad_multiple = 1, as the deliverable was; 20 epochs: the speed does
#     not depend on the weights): 1024 graphs at 64 steps and 40 graphs at 1024 steps,
#     as trained (--pad_multiple 0) and padded;
#  b) the recipe's size buckets in size order (config.data.bucket_order=sizes, each bucket's
#     steps a lax.scan since session 37) against the default random order, 150 epochs each;
#  c) round 93's quality half: the SBM-27 paper config (bf16, fused blocks) with
#     pad_multiple 1 and 4, 1024 graphs each (32 steps, sampling seed 0); score on the CPU:
#     python benchmarks/check_samples.py --data sbm_27 --protocol paper OUT/res/sbm27_pad{1,4}.json
#   bash benchmarks/calls/round94_pad_sampling.sh OUT
set -u
OUT=${1:?OUT}
R=$OUT/res
L=/tmp/r94/logs
mkdir -p "$R" "$L"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$R/gpu.txt" 2>&1
stamp() { echo "$1 rc=$2 process $(( $(date +%s) - $3 )) s" >> "$R/times.txt"; }

# a) sampling with and without the padding override
s=$(date +%s)
timeout 120 python3 train.py --config best_spectre_sbm --config.train.num_epochs=20 \
  --config.validation.every_epochs=0 --config.model.ppgn.pad_multiple=1 \
  --workdir /tmp/r94/sbm --quiet > "$L/train_sbm.log" 2>&1
stamp "a train sbm pad1" $? $s
for arm in "1024 64" "40 1024"; do
  set -- $arm
  for m in 0 32; do
    s=$(date +%s)
    timeout 120 python3 sample.py --workdir /tmp/r94/sbm --checkpoint latest --num_samples $1 \
      --num_steps $2 --seed 0 --protocol none --pad_multiple $m \
      --out /tmp/r94/s_$1_$2_pad$m > "$L/sample_$1_$2_pad$m.log" 2>&1
    stamp "a sample n=$1 T=$2 pad_multiple=$m" $? $s
    grep "sampled" "$L/sample_$1_$2_pad$m.log" >> "$R/times.txt"
  done
done
python3 - >> "$R/summary.txt" 2>&1 <<'PY'
import glob, json
import numpy as np
for n, t in ((1024, 64), (40, 1024)):
    a = [json.load(open(f"/tmp/r94/s_{n}_{t}_pad{m}/samples.json")) for m in (0, 32)]
    ga, gb = (x["graphs"] if isinstance(x, dict) else x for x in a)
    same = sum(json.dumps(p, sort_keys=True) == json.dumps(q, sort_keys=True)
               for p, q in zip(ga, gb))
    print(f"sampling n={n} T={t}: {same} of {len(ga)} graphs identical with and without padding")
PY

# b) bucket order: sizes (one lax.scan per bucket) against random
for order in random sizes; do
  s=$(date +%s)
  timeout 150 python3 train.py --config best_spectre_sbm --config.train.num_epochs=150 \
    --config.validation.every_epochs=0 --config.train.checkpoint_every_epochs=150 \
    --config.data.bucket_order=$order --workdir /tmp/r94/order_$order --quiet \
    > "$L/train_order_$order.log" 2>&1
  stamp "b train bucket_order=$order" $? $s
done

# c) SBM-27 paper config, pad 1 and 4, samples for the CPU
for m in 1 4; do
  s=$(date +%s)
  timeout 80 python3 train.py --config configs/paper.py:sbm_27,ppgn,simple \
    --workdir /tmp/r94/sbm27_pad$m --quiet --config.model.compute_dtype=bfloat16 \
    --config.model.ppgn.fused=true --config.train.checkpoint_every_epochs=5000 \
    --config.model.ppgn.pad_multiple=$m > "$L/train_sbm27_pad$m.log" 2>&1
  stamp "c train sbm27 pad$m" $? $s
  timeout 60 python3 sample.py --workdir /tmp/r94/sbm27_pad$m --checkpoint latest \
    --num_samples 1024 --seed 0 --protocol none --out /tmp/r94/sbm27_s$m \
    > "$L/sample_sbm27_pad$m.log" 2>&1
  stamp "c sample sbm27 pad$m" $? $s
  cp /tmp/r94/sbm27_s$m/samples.json "$R/sbm27_pad$m.json" 2>/dev/null
done

python3 - >> "$R/summary.txt" 2>&1 <<'PY'
import glob, json
for f in sorted(glob.glob("/tmp/r94/*/metrics.jsonl")):
    ends = [r for r in map(json.loads, open(f)) if r.get("event") == "end"]
    if ends:
        e = ends[-1]
        print(f, {k: (round(e[k], 2) if isinstance(e.get(k), float) else e.get(k))
                  for k in ("epochs", "steps", "seconds", "first_call_seconds", "chunk_seconds",
                            "checkpoint_seconds", "best_loss", "loss")})
PY
tar czf "$R/logs.tar.gz" -C /tmp/r94 logs
cat "$R/times.txt" "$R/summary.txt"
