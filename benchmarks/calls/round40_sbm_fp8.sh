#!/usr/bin/env bash
# Round 40 (issues 12/13), one H200 (~9 min): does DDGJAX_FP8_PRODUCT keep SPECTRE SBM
# samples? (Round 37 checked it on Planar-60 only.) Trains configs/best.py:spectre_sbm
# (training seed 1, the recipe's 2000 epochs or until TRAIN_SECONDS, validation every 500
# epochs as configured), then samples its best_val (EMA) 5 seeds x 40 graphs at 64 steps
# three ways: the XLA path (as the deliverable was sampled), the Mosaic kernels (--pallas),
# and the Mosaic kernels with float8 pair outputs (--pallas, DDGJAX_FP8_PRODUCT=1).
# Score on the CPU (graph-tool's fit):
#   python benchmarks/check_samples.py --data spectre_sbm --protocol spectre --validity sbm \
#       OUT/samples/r40_{xla,pallas,fp8}_seed{0,1,2,3,4}.json
#   bash benchmarks/calls/round40_sbm_fp8.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/samples"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
W=/tmp/r40_sbm
timeout ${TRAIN_SECONDS:-400} python3 train.py --config configs/best.py:spectre_sbm --workdir $W \
  --quiet --config.train.seed=1 ${EXTRA:-} > "$OUT/train.log" 2>&1
echo "train rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
cp $W/metrics.jsonl "$OUT/metrics.jsonl" 2>/dev/null
for v in "xla||0" "pallas|--pallas|0" "fp8|--pallas|1"; do
  IFS='|' read -r name flag fp8 <<< "$v"
  DDGJAX_FP8_PRODUCT=$fp8 timeout ${SAMPLE_SECONDS:-60} python3 benchmarks/vun_eval.py --workdir $W \
    --checkpoint best_val --ema --validity none --protocol none --seeds 5 --num_samples 40 \
    --num_steps 64 $flag --name r40_$name --out "$OUT/samples" > "$OUT/vun_$name.log" 2>&1
  echo "sample $name rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
done
tar czf "$OUT/r40.tar.gz" -C "$OUT" samples metrics.jsonl train.log times.txt gpu.txt vun_xla.log vun_pallas.log vun_fp8.log
cat "$OUT/times.txt"; tail -3 "$OUT/metrics.jsonl"
