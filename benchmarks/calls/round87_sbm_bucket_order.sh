#!/usr/bin/env bash
# Round 87 (issue 13's buckets; session 36), one H200 (~5 min): config.data.bucket_order on
# SPECTRE SBM, its natural use (buckets 64,96,128,187; 5 bucket steps an epoch). The SBM
# recipe (best_spectre_sbm) for 150 epochs, no validation, checkpoints every 50, three ways,
# each a fresh process: the seeded interleaving (one jitted call per step, 4 programs), the
# size order (one program per chunk, 5 step bodies), and the size order for two seeds in one
# program (--seeds 0,1; refused before the option). Each run's end record (metrics.jsonl)
# gives the loop's seconds, the first call's (compile) and the steps.
#   bash benchmarks/calls/round87_sbm_bucket_order.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
git rev-parse HEAD > "$OUT/res/commit.txt" 2>&1
T0=$(date +%s)
COMMON="--config best_spectre_sbm --config.train.num_epochs=${EPOCHS:-150} --config.validation.every_epochs=0 --config.train.checkpoint_every_epochs=50"
for v in "random|" "sizes|--config.data.bucket_order=sizes" "sizes_2seeds|--config.data.bucket_order=sizes --seeds 0,1"; do
  name=${v%%|*}; opts=${v#*|}
  s=$(date +%s)
  timeout ${LIMIT:-200} python3 train.py $COMMON $opts --workdir /tmp/r87/$name > "$OUT/res/$name.log" 2>&1
  echo "$name rc=$? process $(( $(date +%s) - s )) s" >> "$OUT/res/times.txt"
done
python3 - "$OUT/res" <<'PY' > "$OUT/res/summary.txt" 2>&1
import glob, json, os, sys
for f in sorted(glob.glob("/tmp/r87/**/metrics.jsonl", recursive=True)):
    ends = [r for r in map(json.loads, open(f)) if r.get("event") == "end"]
    if ends:
        e = ends[-1]
        print(f, {k: (round(e[k], 2) if isinstance(e.get(k), float) else e.get(k))
                  for k in ("epochs", "steps", "steps_per_epoch", "seconds", "first_call_seconds",
                            "chunk_seconds", "checkpoint_seconds")})
PY
cat "$OUT/res/times.txt" "$OUT/res/summary.txt"
tar czf "$OUT/r87.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
