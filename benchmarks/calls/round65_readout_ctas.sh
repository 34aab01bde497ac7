#!/usr/bin/env bash
# Round 65 (issue 12), one H200, the session's last 348 s of device time: the readout kernel
# at two CTAs per SM (a ring of two buffers, so that two fit; DDGJAX_READOUT_CTAS_PER_SM=2)
# on top of round 64's best (weights_y, the norm kernel at 3 CTAs per SM, the mixing kernel
# at 2), one sampling row each in fresh processes; the faster runs the peer row.
#   bash benchmarks/calls/round65_readout_ctas.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
BASE="DDGJAX_FP8_ACTIVATIONS=weights_y DDGJAX_NORM_KERNEL=1 DDGJAX_NORM_CTAS_PER_SM=3 DDGJAX_MIX_CTAS_PER_SM=2"
arm_env() { [ "$1" = ro2 ] && echo "$BASE DDGJAX_READOUT_CTAS_PER_SM=2" || echo "$BASE"; }
for arm in ro2 r64; do
  env $(arm_env $arm) timeout 80 python3 benchmarks/sample_row.py "$OUT/sample_$arm.json" \
    > "$OUT/sample_$arm.log" 2>&1
  stamp "sample_$arm" $?
done
BEST=$(python3 - "$OUT" <<'PY'
import json, sys, glob
best = {}
for f in glob.glob(sys.argv[1] + "/sample_*.json"):
    best[f.rsplit("/", 1)[1][7:-5]] = json.load(open(f))["seconds"]
print(min(best, key=best.get) if best else "r64")
PY
)
echo "peer row under: $BEST ($(arm_env $BEST))" | tee -a "$OUT/times.txt"
env $(arm_env $BEST) timeout 215 python3 benchmarks/bench_speed.py --tf32 on --no_batched \
  --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_$BEST.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done
grep -v Warn "$OUT/bench_speed.log" | tail -3
