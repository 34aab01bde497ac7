#!/usr/bin/env bash
# Round 17 (issue 12), one GPU: where the small models' set-up, compile and five-seed steps
# go, and two cheap levers against them.
#   S. benchmarks/setup_profile.py --init eager|jit|cpu: the set-up before the first step
#      and every XLA compile in it, three ways of initialising the parameters;
#   P. benchmarks/seeds_speed.py --profile --epochs 300 (one run, then 5 seeds in one
#      program) under jax.profiler: device time and kernels per step;
#   T. on a machine of two or more GPUs: the Planar-60 paper config (float32, batch 64),
#      450 epochs in 3 jitted calls, on one GPU then on two (benchmarks/epoch_times.py:
#      the whole loop, saves included, and the jitted calls alone), as round 13 measured
#      it before the packed asynchronous checkpoints;
#   C. the one-run phase of the Ego-small paper config twice with JAX's persistent
#      compilation cache (an empty folder; every compile cached, however short): cold,
#      then warm;
#   G. seeds_speed.py --epochs 1000, both phases: as it is; with 4 and 12 training steps
#      per loop iteration (train.scan_unroll); and with XLA's command buffers (CUDA
#      graphs) extended to loops and conditionals
#      (--xla_gpu_enable_command_buffer=...,WHILE,CONDITIONAL).
#   B. the Ego-small paper config, 1000 epochs in 2 jitted calls (epoch_times.py), quiet
#      and with the CLI's progress bar (a host callback in every step).
# Every step but T runs on GPU 0 alone (CUDA_VISIBLE_DEVICES=0).
# Results go to a scratch folder, packed into OUT/results.tar.gz after every step, so a
# call cut short still brings back the steps it finished.
# It ran once, at commit 4a370fa (docs/benchmarks.md "Round 17"), on the 2 x H200 machine.
# After it, train.scan_unroll (G) was removed (no gain, twice the compile), the eager init
# moved to the host CPU (S: "eager" is now what "cpu" was; "device" the old eager), and
# the progress bar stopped calling back in every step (B).
# Usage: HARD_SECONDS=560 bash benchmarks/calls/speed_round17.sh OUT
set -uo pipefail
FINAL=$(cd "$1" && pwd)
OUT=$(mktemp -d /tmp/speed_round17.XXXX)
source "$(dirname "$0")/gpu_call_common.sh"
HARD=${HARD_SECONDS:-560}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
export CUDA_VISIBLE_DEVICES=0
for v in eager jit cpu; do
  step setup_$v 20 60 python benchmarks/setup_profile.py --init $v --out "$OUT/res/setup_$v.json"
done
step seeds_profile 60 150 python benchmarks/seeds_speed.py --seeds 5 --epochs 300 --profile \
  --out "$OUT/res/seeds_profile.json"
step seeds_1000_default 50 120 python benchmarks/seeds_speed.py --seeds 5 --epochs 1000 \
  --out "$OUT/res/seeds_1000_default.json"
for u in 4 12; do
  step seeds_1000_unroll$u 50 120 python benchmarks/seeds_speed.py --seeds 5 --epochs 1000 \
    --option train.scan_unroll=$u --out "$OUT/res/seeds_1000_unroll$u.json"
done
XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL" \
  step seeds_1000_cmdbuf 50 120 python benchmarks/seeds_speed.py --seeds 5 --epochs 1000 \
  --out "$OUT/res/seeds_1000_cmdbuf.json"
for v in quiet progress; do
  step bar_$v 30 60 python benchmarks/epoch_times.py --epochs 1000 $([ $v = progress ] && echo --progress) \
    --out "$OUT/res/bar_$v.json" configs/paper.py:ego_small,ppgn,simple
done
if [ "$ngpu" -ge 2 ]; then
  for vis in 0 0,1; do
    CUDA_VISIBLE_DEVICES=$vis step two_gpus_${vis/,/_} 60 150 python benchmarks/epoch_times.py \
      --epochs 450 --chunks 3 --out "$OUT/res/two_gpus_${vis/,/_}.json" configs/paper.py:planar_60,ppgn,simple
  done
fi
cache_cold_warm 45 90
tar czf "$FINAL/results.tar.gz" -C "$OUT" res
echo "packed at $(elapsed) s"; ls -la "$FINAL"
