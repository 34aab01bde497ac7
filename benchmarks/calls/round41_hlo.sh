#!/usr/bin/env bash
# Round 41 (issue 12), one H200 (~2 min): the optimized HLO and kernel profile of
#   (a) one Ego-small train step (seeds_profile.py, one seed / five seeds / wide), and
#   (b) one PPGN 8x128 Planar-60 train step, batch 64 (profile_ppgn.py --train only),
# both bf16 + fused blocks, to map each kernel of the profile to the ops it fuses before
# writing the block's backward by hand. Writes OUT/hlo.tar.gz and the summaries.
#   bash benchmarks/calls/round41_hlo.sh OUT
set -u
OUT=${1:?OUT}
mkdir -p "$OUT/seeds" "$OUT/ppgn"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BF="--option=model.compute_dtype=bfloat16 --option=model.ppgn.fused=true"
timeout 150 python3 benchmarks/seeds_profile.py --out "$OUT/seeds" $BF > "$OUT/seeds.log" 2>&1
echo "seeds rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
timeout 200 python3 benchmarks/profile_ppgn.py --out "$OUT/ppgn" --dtypes bfloat16 \
  --skip_ceilings --sample_batch 64 --option model.ppgn.fused=true > "$OUT/ppgn.log" 2>&1
echo "ppgn rc=$? $(( $(date +%s) - T0 )) s" >> "$OUT/times.txt"
tar czf "$OUT/hlo.tar.gz" -C "$OUT" seeds ppgn && rm -rf "$OUT/seeds" "$OUT/ppgn"
