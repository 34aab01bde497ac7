#!/usr/bin/env bash
# Issue 12, round 15 (one GPU): the instance norm folded into the Pallas kernels that read
# it (ddgjax/models/norm_folding.py) and the one-pass readout kernel
# (ddgjax/models/readout_kernel.py), measured against the round-4 kernels in one call:
#  1. profile_ppgn.py forward (bf16, 1024 graphs, N = 60) for the three settings
#     (DDGJAX_FOLD_NORM=0: round 4; DDGJAX_READOUT_KERNEL=0: folded norms, XLA readout;
#     default: both);
#  2. bench_speed.py sampling row (bf16, ddgjax only) with DDGJAX_FOLD_NORM=0, the
#     baseline of the same card;
#  3. bench_speed.py in full (PyTorch eager and torch.compile beside ddgjax) with the
#     default (folded) Pallas path -> $OUT/res/bench_speed.json;
#  4. if time is left: the round-10 Planar-60 model sampled at the fast setting (quality).
# Ran once (2026-11-27, one H200) at commit 62626af; the folding and readout-kernel code
# was reverted after it (both slower; docs/benchmarks.md "Round 15"), so run it from a
# checkout of 62626af: `git checkout 62626af && bash benchmarks/calls/speed_round15.sh $OUT`.
# Usage (GPU machine, repo root): bash benchmarks/calls/speed_round15.sh $OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
R=$OUT/res
for v in "nofold:DDGJAX_FOLD_NORM=0" "fold_xla_readout:DDGJAX_READOUT_KERNEL=0" "fold:"; do
  name=${v%%:*}; vars=${v#*:}
  env $vars timeout 150 python3 benchmarks/profile_ppgn.py --out $R/prof --dtypes bfloat16 \
    --calls 3 --skip_train --skip_ceilings --tag "_$name" --option model.ppgn.pallas=true \
    > $R/prof_$name.log 2>&1
  grep '^  {' $R/prof_$name.log; grep -i -A3 "Traceback" $R/prof_$name.log | tail -4
  echo "profile $name done at $(elapsed) s"
done
python3 - "$R/prof" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/profile_sample_forward_*.json")):
    d = json.load(open(f)); print(f.split("/")[-1])
    for r in d["kernels"][:10]:
        print(f"  {r['ms_per_call']:7.3f} x{r['count_per_call']:4.0f} {r['name'][:80]}")
PY
rm -f $R/prof/*.hlo.txt
DDGJAX_FOLD_NORM=0 timeout 150 python3 benchmarks/bench_speed.py --out $R/bench_nofold.json \
  --rows sample --dtypes bfloat16 --skip_torch --no_batched --ddgjax_option model.ppgn.pallas=true \
  > $R/bench_nofold.log 2>&1; tail -4 $R/bench_nofold.log; echo "baseline done at $(elapsed) s"
timeout $(( 560 - $(elapsed) - 10 )) python3 benchmarks/bench_speed.py --out $R/bench_speed.json \
  --tf32 on --no_batched --ddgjax_option model.ppgn.pallas=true \
  --ddgjax_train_option model.ppgn.fused=true > $R/bench_speed.log 2>&1
tail -12 $R/bench_speed.log; echo "bench done at $(elapsed) s"
left=$(( 560 - $(elapsed) ))
if [ $left -gt 120 ] && [ -f .devdata/models/best_p60_d10.tar.gz ]; then
  mkdir -p runs/p60 && tar xzf .devdata/models/best_p60_d10.tar.gz -C runs/p60
  timeout $(( left - 20 )) python3 benchmarks/vun_eval.py \
    --workdir runs/p60/best_p60_d10 --checkpoint latest --ema --validity planar \
    --protocol paper --seeds 3 --num_samples 1024 --num_steps 32 --option grid=power:4 \
    --compute_dtype bfloat16 --pallas --no_graphs --name p60_bf16_folded --out $R/quality \
    > $R/quality.log 2>&1; tail -5 $R/quality.log
fi
pack_results
