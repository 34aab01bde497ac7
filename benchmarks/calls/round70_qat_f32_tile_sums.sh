#!/usr/bin/env bash
# Round 70 (issue 12; session 33), one H200 (~7 min): (1) round 69's missing float32 arm
# (it ran out of memory at a 0.1 memory fraction): 2 x 1024 Planar-60 graphs in float32
# (XLA) from round 69's fp8_weights checkpoint, carried as .devdata/r69/r69_planar;
# (2) the mixing kernels' per-tile statistics summed per graph by a static gather (the new
# default) against segment_sum's scatter (DDGJAX_TILE_SUMS=scatter): the reduction alone
# (benchmarks/tile_sums.py) and sampling 1024 Planar-60 graphs under weights_y in fresh
# processes (gather, scatter, gather); (3) the peer row under weights_y (bench_speed.py,
# torch eager and torch.compile in the same process), as round 68.
# Score the float32 arm on the CPU:
#   python benchmarks/check_samples.py --data planar_60 --protocol paper --validity planar \
#       OUT/q/f32_s{0,1}/samples.json
#   bash benchmarks/calls/round70_qat_f32_tile_sums.sh OUT      (carry .devdata/r69/r69_planar)
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/q"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
stamp() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"; }
RUN=.devdata/r69/r69_planar
for k in 0 1; do
  timeout 100 python3 sample.py --workdir $RUN --checkpoint latest --num_samples 1024 \
    --seed $k --compute_dtype float32 --nopallas --protocol none --out "$OUT/q/f32_s$k" \
    > "$OUT/q/sample_f32_s$k.log" 2>&1
  stamp "quality_f32_s$k" $?
  rm -f "$OUT/q/f32_s$k/grid.png" "$OUT/q/f32_s$k/chain.png"
done
tar czf "$OUT/q.tar.gz" -C "$OUT" q && rm -rf "$OUT/q"
timeout 90 python3 benchmarks/tile_sums.py --out "$OUT/tile_sums.json" > "$OUT/tile_sums.log" 2>&1
stamp tile_sums $?
export DDGJAX_FP8_ACTIVATIONS=weights_y
for v in gather scatter gather2; do
  DDGJAX_TILE_SUMS=${v%2} timeout 80 python3 benchmarks/sample_row.py "$OUT/sample_wy_$v.json" \
    > "$OUT/sample_wy_$v.log" 2>&1
  stamp "sample_wy_$v" $?
done
timeout 240 python3 benchmarks/bench_speed.py --tf32 on --no_batched \
  --repeat_sample 3 --ddgjax_option model.ppgn.pallas=true --rows sample --dtypes bfloat16 \
  --out "$OUT/bench_speed_wy.json" > "$OUT/bench_speed.log" 2>&1
stamp bench_speed $?
tar czf "$OUT/logs.tar.gz" -C "$OUT" tile_sums.log sample_wy_gather.log sample_wy_scatter.log \
  sample_wy_gather2.log bench_speed.log
cat "$OUT/times.txt"; cat "$OUT/tile_sums.log" | grep version
for v in gather scatter gather2; do grep -o '"seconds[^,]*' "$OUT/sample_wy_$v.json" | head -2; done
grep -v Warn "$OUT/bench_speed.log" | tail -3
