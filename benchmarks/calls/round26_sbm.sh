#!/usr/bin/env bash
# Round 26 (issue 13), a 4-GPU machine (~9.5 min): two levers never tried on SBM, each with
# training seeds 1 and 2 on round 24's h64b8 variant (64 channels, batch 8; V.U.N. 67.0 %
# and 56.3 % with graph-tool's fit at these seeds, rounds 24-25), one run per GPU
# (benchmarks/calls/round14_sbm_variants.sh: validation every 250 epochs on 128 samples with our
# fit, logit scale 0.9, power:3, up to 2000 epochs or the call's time, then 5 x 40 samples
# at 64 steps from best_val):
#   unroll_s1, unroll_s2  step-unrolled training (config.diffusion.unroll_prob = 0.5): half
#                          the graphs train on the model's own 64-step sampler step
#   layer_s1, layer_s2     layer norm per entry instead of the instance norm
#                          (config.model.ppgn.norm = "layer"): keeps absolute counts such as
#                          a community's size, which the failures (blocks under 20 and over
#                          40 nodes) suggest the model gets wrong
# Then our SBM fit on every variant's samples (benchmarks/sbm_failures.py, the GPU host's
# CPUs): $OUT/fail.tar.gz. $OUT/sbm/results.tar.gz as round 14's driver packs it.
# EXTRA_ALL: more overrides for every variant (a CPU dry run: a tiny model, few epochs).
# Usage: bash benchmarks/calls/round26_sbm.sh OUT
set -uo pipefail
OUT=$1; mkdir -p $OUT/sbm $OUT/fail
H64B8="--config.model.ppgn.hidden=64 --config.train.batch_size=8"
VARIANTS="unroll_s1:$H64B8 --config.diffusion.unroll_prob=0.5|unroll_s2:$H64B8 --config.diffusion.unroll_prob=0.5 --config.train.seed=2|layer_s1:$H64B8 --config.model.ppgn.norm=layer|layer_s2:$H64B8 --config.model.ppgn.norm=layer --config.train.seed=2" \
  EPOCHS=${EPOCHS:-2000} GRID=power:3 SEED=1 CALL=1 HARD_SECONDS=${HARD_SECONDS:-520} \
  SAMPLE_SECONDS=${SAMPLE_SECONDS:-75} PACK_BEST=${PACK_BEST:-1} RUNS_DIR=runs/r26 \
  bash benchmarks/calls/round14_sbm_variants.sh $OUT/sbm
tmp=$(mktemp -d); tar xzf $OUT/sbm/results.tar.gz -C $tmp
for name in unroll_s1 unroll_s2 layer_s1 layer_s2; do
  files=$(ls $tmp/res/samples/sbm14_${name}_c1_seed*.json 2>/dev/null | grep -v check)
  [ -n "$files" ] && timeout 120 python benchmarks/sbm_failures.py --reference spectre_sbm:test \
    --generated $files --fit ddgjax --out $OUT/fail/$name > $OUT/fail/$name.log 2>&1 &
done
wait
grep -H "^generated" $OUT/fail/*.log
tar czf $OUT/fail.tar.gz -C $OUT fail && rm -rf $OUT/fail   # at most 8 files come back
