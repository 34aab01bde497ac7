#!/usr/bin/env bash
# Round 82 (issue 12; session 35), one H200 (~8 min): round 81 again with the fold's right operand staged K-major ([16, H], 128-byte swizzle, read transposed), the PPGN's output layer folded into
# the Mosaic readout kernel (DDGJAX_READOUT_FOLD=1: the kernel writes the logits, float32
# [M], instead of the 128-channel bf16 out^T that XLA reads back; one more MMA per tile
# with out as a transposed left operand, N = 16). (a) its kernel and model tests compiled
# on the GPU; (b) benchmarks/readout_fold_probe.py: whether it lowers (N = 16, else 32,
# 64), its error and time against the unfolded kernel + XLA's output layer, bf16 and
# float8; (c) the sampling row, fresh processes alternating: weights_y with and without
# the fold (and the fold with round 80's one-accumulator mixing kernel), twice each; bf16
# with and without, once each; (d) the peer row (bench_speed.py) with the fastest
# weights_y arm.
#   bash benchmarks/calls/round82_readout_fold.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
XLA_PYTHON_CLIENT_MEM_FRACTION=0.6 timeout 120 python3 benchmarks/readout_fold_probe.py \
  --out "$OUT/fold_probe.json" > "$OUT/fold_probe.log" 2>&1
stamp fold_probe $?
OK16=$(python3 -c "
import json, sys
d = json.load(open('$OUT/fold_probe.json'))
print(int(any(r.get('setting') == 'fp8w' and r.get('fold_width') == 16 and r.get('compiled')
              for r in d['probe'])))" 2>/dev/null || echo 0)
if [ "$OK16" != 1 ]; then
  echo "the float8 fold at N = 16 did not lower: stop" >> "$OUT/times.txt"
  cat "$OUT/times.txt"; grep -v Warn "$OUT/fold_probe.log" | tail -8
  tar czf /tmp/r82.tar.gz -C "$OUT" . 2>/dev/null && mv /tmp/r82.tar.gz "$OUT/r82.tar.gz"
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name r82.tar.gz ! -name times.txt -exec rm -rf {} +
  exit 0
fi
JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_MEM_FRACTION=0.4 timeout 120 python3 -m pytest -q -n 0 \
  -p no:cacheprovider tests/test_mgpu_kernels.py -k "folded or one_accumulator" \
  > "$OUT/pytest.log" 2>&1
stamp pytest $?
arm_env() {
  case $1 in
    wy) echo DDGJAX_FP8_ACTIVATIONS=weights_y DDGJAX_READOUT_FOLD=0 ;;
    wyfold) echo DDGJAX_FP8_ACTIVATIONS=weights_y DDGJAX_READOUT_FOLD=1 ;;
    wyfold1acc) echo DDGJAX_FP8_ACTIVATIONS=weights_y DDGJAX_READOUT_FOLD=1 DDGJAX_MIX_ONE_ACC=1 ;;
    bf16) echo DDGJAX_FP8_ACTIVATIONS=0 DDGJAX_READOUT_FOLD=0 ;;
    bf16fold) echo DDGJAX_FP8_ACTIVATIONS=0 DDGJAX_READOUT_FOLD=1 ;;
  esac
}
for arm in wy wyfold wyfold1acc bf16 wyfold1acc wyfold wy bf16fold; do
  k=1; [ -f "$OUT/sample_$arm.1.json" ] && k=2
  env $(arm_env $arm) timeout 70 python3 benchmarks/sample_row.py "$OUT/sample_$arm.$k.json" \
    > "$OUT/sample_$arm.$k.log" 2>&1
  stamp "sample_$arm.$k" $?
done
BEST=$(python3 - "$OUT" <<'PY'
import json, sys, glob
o = sys.argv[1]
t = {}
for arm in ("wy", "wyfold", "wyfold1acc"):
    v = [json.load(open(f))["seconds"] for f in glob.glob(f"{o}/sample_{arm}.*.json")]
    if v:
        t[arm] = min(v)
print(min(t, key=t.get) if t else "wy")
PY
)
echo "peer row with $BEST" >> "$OUT/times.txt"
LEFT=$(( 580 - $(date +%s) + T0 ))
env $(arm_env $BEST) timeout $LEFT python3 benchmarks/bench_speed.py --tf32 on --no_batched \
  --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_$BEST.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
cat "$OUT/times.txt"; grep -v Warn "$OUT/fold_probe.log" | tail -8
for f in "$OUT"/sample_*.log; do tail -1 "$f"; done
grep -v Warn "$OUT/bench_speed.log" | tail -3; tail -3 "$OUT/pytest.log"
tar czf /tmp/r82.tar.gz -C "$OUT" . 2>/dev/null && mv /tmp/r82.tar.gz "$OUT/r82.tar.gz"
find "$OUT" -mindepth 1 -maxdepth 1 ! -name r82.tar.gz ! -name times.txt -exec rm -rf {} +
