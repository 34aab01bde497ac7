#!/usr/bin/env bash
# Round 26 (issue 12), one GPU (~6 min): the five-seed program is device-bound while one
# run is launch-bound (round 17), so fewer bytes per step should help the five seeds more
# than the one run. `python benchmarks/seeds_speed.py --seeds 5` (one run, then five seeds
# in one program, each phase a fresh process; Ego-small paper config) three times:
#   f32        the paper config as it is (float32 compute, reference blocks)
#   bf16       --option model.compute_dtype=bfloat16
#   bf16fused  the same + --option model.ppgn.fused=true
# Quality: every kept run's `best` checkpoint sampled (1024 graphs, sampling seed 0, the
# config's sampler; sample.py writes eval.json, the paper-protocol MMDs against the test
# split), so the five training seeds of f32 and bf16fused can be compared.
# $OUT/seeds_bf16.tar.gz. EXTRA (e.g. "--epochs 2") and NUM_SAMPLES: a CPU dry run.
# Usage: bash benchmarks/calls/round26_seeds_bf16.sh OUT
set -uo pipefail
OUT=$1; mkdir -p "$OUT/res"
# several samplers share the card at the end: no preallocation (as first run, without
# this line, eight of the twelve ran out of memory and the quality samples were redone)
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
KEEP=/tmp/r26_keep; rm -rf $KEEP
for v in "f32|" "bf16|--option=model.compute_dtype=bfloat16" \
         "bf16fused|--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"; do
  name=${v%%|*}; opts=${v#*|}
  timeout ${PHASE_LIMIT:-200} python benchmarks/seeds_speed.py --seeds 5 $opts ${EXTRA:-} --keep $KEEP/$name \
    --out "$OUT/res/seeds_$name.json" > "$OUT/res/seeds_$name.log" 2>&1
  echo "$name rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
done
for name in f32 bf16fused; do
  for w in $KEEP/$name/single $KEEP/$name/seeds/seed_*; do
    timeout 60 python sample.py --workdir $w --checkpoint best --num_samples ${NUM_SAMPLES:-1024} --seed 0 \
      --out "$OUT/res/samples_${name}_$(basename $w)" > "$OUT/res/sample_${name}_$(basename $w).log" 2>&1 &
  done
  wait
  echo "sampled $name at $(( $(date +%s) - T0 )) s" >> "$OUT/res/times.txt"
done
for d in "$OUT"/res/samples_*; do
  rm -f "$d"/samples.json "$d"/*.graphml   # keep eval.json and grid.png only
done
python - "$OUT/res" <<'PY'
import glob, json, os, sys
root = sys.argv[1]
for f in sorted(glob.glob(os.path.join(root, "seeds_*.json"))):
    d = json.load(open(f))
    s, m = d.get("single", {}), d.get("multi", {})
    print(os.path.basename(f), "one run %.1f s (%.3f ms/step)" % (s.get("total_s", -1), s.get("ms_per_step", -1)),
          "five seeds %.1f s (%.3f ms/step)" % (m.get("total_s", -1), m.get("ms_per_step", -1)),
          "ratio %.2f" % d.get("ratio_total", -1))
for f in sorted(glob.glob(os.path.join(root, "samples_*", "eval.json"))):
    e = json.load(open(f))
    print(f.split("/")[-2], {k: round(v, 4) for k, v in e.items() if isinstance(v, float)})
PY
tar czf "$OUT/seeds_bf16.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
