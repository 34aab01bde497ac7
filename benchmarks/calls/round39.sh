#!/usr/bin/env bash
# Round 39 (issue 12), the 2 x H200 machine, both GPUs at once (~7 min):
#   GPU 0: PART=fp8 of round37_bench.sh: the bf16 sampling row with float8 pair outputs
#          beside PyTorch, then the Mosaic kernel tests that toggle kernel switches.
#   GPU 1: where the five-seed Ego-small step goes: seeds_speed.py --epochs 300 --profile,
#          bf16 + fused, with train.precompile=false (round 38's profiled runs crashed with
#          SIGSEGV; the background compile thread is new since round 17's profile), then the
#          same phases unprofiled with XLA's Triton GEMMs off (cuBLAS for every GEMM).
#   bash benchmarks/calls/round39.sh OUT
# ONE_GPU=1 (as it ran: only one H200 was lent): the same on one card, one after the
# other, and the float8 bench row without the kernel tests (the kernels are unchanged
# since round 37's GPU pytest).
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/bench" "$OUT/seeds"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
B="--tf32 on --no_batched --repeat_sample 2 --repeat_train 3 --ddgjax_option model.ppgn.pallas=true"
if [ "${ONE_GPU:-0}" = 1 ]; then
  DDGJAX_FP8_PRODUCT=1 timeout 200 python3 benchmarks/bench_speed.py $B --rows sample \
    --dtypes bfloat16 --out "$OUT/bench/bench_speed_fp8.json" > "$OUT/bench/bench_fp8.log" 2>&1
  echo "bench fp8 rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
else
  ( CUDA_VISIBLE_DEVICES=0 PART=fp8 bash "$(dirname "$0")/round37_bench.sh" "$OUT/bench" \
      > "$OUT/bench/driver.log" 2>&1; echo "bench done $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt" ) &
fi
(
  [ "${ONE_GPU:-0}" = 1 ] || export CUDA_VISIBLE_DEVICES=1
  S=$OUT/seeds
  BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
  timeout 120 python3 benchmarks/seeds_speed.py --seeds 5 --epochs 300 --profile $BF \
    --option=train.precompile=false --out "$S/prof.json" > "$S/prof.log" 2>&1
  echo "prof rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
  for v in "default|" "notriton|--xla_gpu_enable_triton_gemm=false"; do
    name=${v%%|*}; flags=${v#*|}
    XLA_FLAGS="$flags" timeout 90 python3 benchmarks/seeds_speed.py --seeds 5 --epochs 600 $BF \
      --out "$S/e600_$name.json" > "$S/e600_$name.log" 2>&1
    echo "e600 $name rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
  done
) &
wait
tar czf "$OUT/round39.tar.gz" -C "$OUT" bench seeds gpu.txt times.txt
cat "$OUT/times.txt"
python3 - "$OUT" <<'PY'
import json, sys, os
o = sys.argv[1]
for f in ("prof", "e600_default", "e600_notriton"):
    p = os.path.join(o, "seeds", f + ".json")
    if not os.path.exists(p):
        print(f, "missing"); continue
    d = json.load(open(p))
    for ph in ("single", "multi"):
        r = d.get(ph, {})
        pr = r.get("profile") or {}
        print(f, ph, {k: r.get(k) for k in ("total_s", "ms_per_step", "compile_s")},
              pr.get("device_ms_per_step"), pr.get("kernels_per_step"))
        for row in (pr.get("top_kernels") or [])[:12]:
            print("   ", round(row["us_per_step"], 1), round(row["count_per_step"], 2), row["name"][:90])
p = os.path.join(o, "bench", "bench_speed_fp8.json")
if os.path.exists(p):
    for r in json.load(open(p))["rows"]:
        print({k: v for k, v in r.items() if k != "detail"})
PY
[ -f "$OUT/bench/pytest.log" ] && tail -3 "$OUT/bench/pytest.log"
