#!/bin/bash
# Issue 12, GPU call 3: reference vs fused vs Pallas pair-MLP kernel, whole sampling runs.
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
python3 benchmarks/profile_ppgn.py --out $R/a --dtypes bfloat16,float32 --calls 3 --skip_train \
  --sample_steps 32 --variant fused=model.ppgn.fused=true --variant pallas=model.ppgn.pallas=true \
  > $R/a.log 2>&1; grep -A12 "^== \|summary\|^  {" $R/a.log | tail -60; tail -5 $R/a.log
for w in 4 8; do for tm in 64 128; do
 DDGJAX_PAIR_MLP_WARPS=$w DDGJAX_PAIR_MLP_TILE=$tm python3 benchmarks/profile_ppgn.py --out $R/w${w}_t${tm} \
  --dtypes bfloat16 --calls 3 --skip_train --skip_ceilings --tag _w${w}_t${tm} --option model.ppgn.pallas=true \
  > $R/w${w}_t${tm}.log 2>&1; grep '^  {' $R/w${w}_t${tm}.log; tail -2 $R/w${w}_t${tm}.log | grep -i error
done; done
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
