#!/usr/bin/env bash
# Round 8, third GPU call (issue 10): the committed "ddgjax best" samples and the default
# sampler per loss.
#  1. The paper's PPGN runs on the three small datasets (L_simple and L_vb) train side by side
#     (benchmarks/reproduce_tables.py), then each is sampled with Algorithm 1 and with
#     Algorithm 2 (3 seeds x 1024 graphs, paper protocol).
#  2. Meanwhile: Planar-60 best (paper protocol, 5 seeds x 1024, graphs kept) and SPECTRE
#     Planar-64 best (SPECTRE protocol, 5 seeds x 40, graphs kept) with the samplers chosen
#     in round 8b (P60_LIST "steps:alg:grid:gamma:mix ..." / P64_ARGS), and the Planar-60 sampler once more in float32
#     with float32 matmuls (no TF32) against bfloat16.
# Usage: bash benchmarks/calls/levers_round8c.sh OUT DATA_DIR TARS
set -euo pipefail
OUT=$1; DATA_DIR=$2; TARS=$3
RUNS=runs/levers
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 DDGJAX_DATA=$DATA_DIR
mkdir -p "$OUT/res" "$OUT/p60" "$OUT/p64" "$RUNS"
SMALL=community_small_ppgn_simple,community_small_ppgn_vb,ego_small_ppgn_simple,ego_small_ppgn_vb,sbm_27_ppgn_simple,sbm_27_ppgn_vb
( python benchmarks/reproduce_tables.py --out runs/small --only $SMALL --phase train --parallel 6 \
    ${SMALL_EXTRA:-} > "$OUT/res/small_train.log" 2>&1
  for a in 1 2; do
    python benchmarks/reproduce_tables.py --out runs/small --only $SMALL --phase sample \
      --algorithm $a --tag _a$a --seeds "${SMALL_SEEDS:-3}" --num-samples "${SMALL_N:-1024}" \
      >> "$OUT/res/small_sample.log" 2>&1
    python benchmarks/reproduce_tables.py --out runs/small --only $SMALL --phase eval \
      --tag _a$a --seeds "${SMALL_SEEDS:-3}" --num-samples "${SMALL_N:-1024}" \
      >> "$OUT/res/small_eval.log" 2>&1
    cp runs/small/results_a$a.json "$OUT/res/small_results_a$a.json" || true
  done ) &
SMALL_PID=$!
for r in best_p60 best_p64; do [ -d $RUNS/$r ] || tar xzf "$TARS/$r.tar.gz" -C $RUNS; done
for s in $P60_LIST; do
  IFS=: read -r steps alg gk gv mix <<< "$s"
  name="planar_60_${steps}_alg${alg}_${gk}${gv}_mix${mix}"
  python benchmarks/vun_eval.py --workdir $RUNS/best_p60 --checkpoint "${P60_CKPT:-latest}" --ema \
    --validity planar --protocol paper --seeds 5 --num_samples "${P60_N:-1024}" \
    --num_steps "$steps" --option algorithm=$alg --option grid=$gk:$gv --option renoise_mix=$mix \
    --name "$name" --out "$OUT/p60" > "$OUT/res/$name.log" 2>&1 || true
  cp "$OUT/p60/${name}_vun.json" "$OUT/res/" 2>/dev/null || true
done
python benchmarks/vun_eval.py --workdir $RUNS/best_p64 --checkpoint "${P64_CKPT:-latest}" --ema \
  --validity planar --protocol spectre --seeds 5 $P64_ARGS \
  --name spectre_planar_64_best --out "$OUT/p64" > "$OUT/res/p64_vun.log" 2>&1 || true
python benchmarks/planar_levers.py sample --out "$OUT/res" --runs $RUNS --variants best_p60 \
  --checkpoint "${P60_CKPT:-latest}" --samplers "$P60_SAMPLER" --compute_dtype float32 \
  --matmul_precision highest --result_name precision_fp32_highest.json \
  --num_samples "${NUM_SAMPLES:-512}" > "$OUT/res/precision_sample.log" 2>&1 || true
python benchmarks/planar_levers.py sample --out "$OUT/res" --runs $RUNS --variants best_p60 \
  --checkpoint "${P60_CKPT:-latest}" --samplers "$P60_SAMPLER" --compute_dtype float32 \
  --result_name precision_fp32_tf32.json \
  --num_samples "${NUM_SAMPLES:-512}" >> "$OUT/res/precision_sample.log" 2>&1 || true
wait $SMALL_PID || true
cp "$OUT"/p64/spectre_planar_64_best_vun.json "$OUT/res/" 2>/dev/null || true
tar czf "$OUT/results.tar.gz" -C "$OUT" res
tar czf "$OUT/p60_seed0.tar.gz" -C "$OUT/p60" $(cd "$OUT/p60" && ls *_seed0.json) 2>/dev/null || true
tar czf "$OUT/p64_graphs.tar.gz" -C "$OUT" p64
rm -rf "$OUT/res" "$OUT/p60" "$OUT/p64"
