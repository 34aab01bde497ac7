#!/usr/bin/env bash
# Round 64 (issue 12), one H200: round 63's norm kernel ran no faster than XLA's fusion
# (one CTA per SM takes its tiles one after the other). Now with two output buffers and
# 1-3 CTAs per SM, and the mixing kernel at 1 or 2 CTAs per SM (norm_kernel.py). The best
# settings (picked here from that file) then run the sampling row under weights_y against
# round 61's best (weights_y, XLA's norm, one mixing CTA per SM), fresh processes,
# alternating; the faster arm runs the peer row (bench_speed.py).
#   bash benchmarks/calls/round64_norm_ctas.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
timeout 150 python3 benchmarks/norm_kernel.py --out "$OUT/norm_kernel.json" \
  --configs 2:1,2:2,2:3,3:2 --tags fp8_fp8,bf16_fp8 --mix 1,2 \
  > "$OUT/norm_kernel.log" 2>&1; stamp norm_kernel $?
# the fastest norm kernel CTAs per SM (float8 in and out, two tiles in flight) and mixing
read NORM_C MIX_C < <(python3 - "$OUT/norm_kernel.json" <<'PY'
import json, sys
rows = {r["name"]: r["ms"] for r in json.load(open(sys.argv[1]))["variants"] if "ms" in r}
norm = min((ms, n) for n, ms in rows.items() if n.startswith("kernel_s2_") and "fp8_fp8" in n)
mix = min((ms, n) for n, ms in rows.items() if n.startswith("mix_"))
print(norm[1].split("_")[2][1:], mix[1].rsplit("_c", 1)[1])
PY
)
echo "picked norm ctas/SM ${NORM_C:=1}, mix ctas/SM ${MIX_C:=1}" | tee -a "$OUT/times.txt"
arm_env() {   # base: round 61's best; new: the norm kernel and the picked CTAs
  if [ "$1" = base ]; then echo "DDGJAX_NORM_KERNEL=0 DDGJAX_MIX_CTAS_PER_SM=1"
  else echo "DDGJAX_NORM_KERNEL=1 DDGJAX_NORM_CTAS_PER_SM=$NORM_C DDGJAX_MIX_CTAS_PER_SM=$MIX_C"; fi
}
for arm in new base new base; do
  n=$([ -f "$OUT/sample_${arm}_1.json" ] && echo 2 || echo 1)
  env $(arm_env $arm) DDGJAX_FP8_ACTIVATIONS=weights_y timeout 100 python3 \
    benchmarks/sample_row.py "$OUT/sample_${arm}_$n.json" > "$OUT/sample_${arm}_$n.log" 2>&1
  stamp "sample_${arm}_$n" $?
done
BEST=$(python3 - "$OUT" <<'PY'
import json, sys, glob
best = {}
for f in glob.glob(sys.argv[1] + "/sample_*_[12].json"):
    arm = f.rsplit("/", 1)[1].split("_")[1]
    best[arm] = min(best.get(arm, 9e9), json.load(open(f))["seconds"])
print(min(best, key=best.get) if best else "base")
PY
)
echo "peer row under: $BEST ($(arm_env $BEST))" | tee -a "$OUT/times.txt"
env $(arm_env $BEST) DDGJAX_FP8_ACTIVATIONS=weights_y timeout 280 python3 \
  benchmarks/bench_speed.py --tf32 on --no_batched --repeat_sample 3 \
  --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_weights_y_$BEST.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"
grep '"name"' "$OUT/norm_kernel.log" | cut -c1-160
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done
grep -v Warn "$OUT/bench_speed.log" | tail -4
