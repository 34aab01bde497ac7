#!/usr/bin/env bash
# Round 38 (issue 12), the 2 x H200 machine, both GPUs at once (~9 min):
#   GPU 0: the peer benchmark with this code's defaults (PART=main of round37_bench.sh:
#          all four rows, fp32 and bf16, beside PyTorch) -> $OUT/bench/bench_speed.json
#   GPU 1: the five-seed Ego-small step with the per-channel product as a multiply and a
#          sum (model.ppgn.product=broadcast) against the batched GEMM (the default):
#          1. benchmarks/channel_product.py (the product alone, fwd and fwd+bwd);
#          2. seeds_speed.py --epochs 300 --profile, bf16 + fused, gemm then broadcast;
#          3. seeds_speed.py (the paper's 5000 epochs), bf16 + fused, broadcast then gemm.
# The two GPUs share the host's 32 cores. The product option and channel_product.py were
# removed after the call (slower; in git at commit 2568da7): run this at that commit.
#   bash benchmarks/calls/round38.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/bench" "$OUT/seeds"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 PART=main bash "$(dirname "$0")/round37_bench.sh" "$OUT/bench" \
    > "$OUT/bench/driver.log" 2>&1; echo "bench done $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt" ) &
(
  export CUDA_VISIBLE_DEVICES=1
  S=$OUT/seeds
  BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
  timeout 120 python3 benchmarks/channel_product.py --out "$S/channel_product.json" > "$S/channel_product.log" 2>&1
  echo "product rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
  for p in gemm broadcast; do
    timeout 110 python3 benchmarks/seeds_speed.py --seeds 5 --epochs 300 --profile $BF \
      --option=model.ppgn.product=$p --out "$S/prof_$p.json" > "$S/prof_$p.log" 2>&1
    echo "prof $p rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
  done
  for p in broadcast gemm; do
    timeout 130 python3 benchmarks/seeds_speed.py --seeds 5 $BF --option=model.ppgn.product=$p \
      --out "$S/full_$p.json" > "$S/full_$p.log" 2>&1
    echo "full $p rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
  done
) &
wait
tar czf "$OUT/round38.tar.gz" -C "$OUT" bench seeds gpu.txt times.txt
cat "$OUT/times.txt"
python3 - "$OUT" <<'PY'
import json, sys, os
o = sys.argv[1]
for f in ("full_broadcast", "full_gemm", "prof_gemm", "prof_broadcast"):
    p = os.path.join(o, "seeds", f + ".json")
    if not os.path.exists(p):
        print(f, "missing"); continue
    d = json.load(open(p))
    for ph in ("single", "multi"):
        r = d.get(ph, {})
        print(f, ph, {k: r.get(k) for k in ("total_s", "process_s", "ms_per_step", "compile_s")},
              (r.get("profile") or {}).get("device_ms_per_step"))
    print(f, "ratio_total", d.get("ratio_total"))
p = os.path.join(o, "seeds", "channel_product.json")
if os.path.exists(p):
    for r in json.load(open(p))["rows"]:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()})
p = os.path.join(o, "bench", "bench_speed.json")
if os.path.exists(p):
    for r in json.load(open(p))["rows"]:
        print(r)
PY
