#!/usr/bin/env bash
# SPECTRE SBM sampler arms on one trained run (issue 13), one GPU: $CKPT, a checkpoint
# tarball as round14_sbm_variants.sh PACK_BEST=K brings back (ckpt_NAME.tar.gz, holding
# NAME/), is unpacked into runs/ and $W (default runs/h64, round 20's 64-channel run) is
# the workdir; every arm of $ARMS (NAME:KEY=VALUE,... separated by ';', as
# benchmarks/sbm_grid_pilot.py --arms) is sampled in its own process, all side by side on
# the card: $NUM node counts drawn from the training graphs (44-187 nodes), seeds $SEEDS,
# $STEPS steps (an arm's steps=K overrides), no fit (the CPU fits them afterwards:
# python benchmarks/sbm_grid_pilot.py --refit OUT/NAME.json --fit ddgjax --out NAME_fit).
# With TEST=1 each arm is instead sampled 5 seeds x 40 graphs, node counts drawn from the
# training split, as for the results tables (benchmarks/vun_eval.py: graphs only; score
# them against the test split with check_samples.py).
# Everything comes back as $OUT/arms.tar.gz (one file: a call returns at most 8).
# Usage: CKPT=.devdata/ckpt_h64.tar.gz ARMS="unif:grid=uniform,logit_scale=0.9;..." \
#          bash benchmarks/calls/sbm_h64_arms.sh OUT      (carry the tarball's folder)
set -uo pipefail
OUT=$1
W=${W:-runs/h64}
HARD=${HARD_SECONDS:-200}
mkdir -p runs /tmp/arms
[ -d $W ] || tar xzf "${CKPT:?set CKPT (a ckpt_NAME.tar.gz) or leave a workdir at $W}" -C runs
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > /tmp/arms/gpu.txt 2>&1
IFS=';' read -ra arms <<< "${ARMS:?set ARMS}"
for a in "${arms[@]}"; do
  name=${a%%:*}
  if [ "${TEST:-0}" = 1 ]; then
    opts=(); IFS=',' read -ra kv <<< "${a#*:}"
    steps=${STEPS:-64}
    for o in "${kv[@]}"; do
      case $o in steps=*) steps=${o#steps=} ;; *) opts+=(--option "$o") ;; esac
    done
    timeout $HARD python benchmarks/vun_eval.py --workdir $W --checkpoint best_val --ema \
      --validity none --protocol none --seeds 5 --num_samples 40 --num_steps $steps \
      "${opts[@]}" --name h64_$name --out /tmp/arms > /tmp/arms/$name.log 2>&1 &
  else
    timeout $HARD python benchmarks/sbm_grid_pilot.py --workdir $W --checkpoint best_val --ema \
      --nodes 44-187 --num ${NUM:-40} --seeds ${SEEDS:-0,1,2} --num_steps ${STEPS:-64} \
      --arms "$a" --fit none --out /tmp/arms/$name > /tmp/arms/$name.log 2>&1 &
  fi
done
wait
tar czf "$OUT/arms.tar.gz" -C /tmp arms && ls -la "$OUT"
