#!/bin/bash
# Issue 12, GPU call 4: reference vs fused vs Pallas (pair-MLP + mix/norm kernels),
# whole 32-step sampling of 1024 graphs; kernel tuning.
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$OUT/r3; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
python3 benchmarks/profile_ppgn.py --out $R/a --dtypes bfloat16,float32 --calls 3 --skip_train \
  --sample_steps 32 --variant fused=model.ppgn.fused=true --variant pallas=model.ppgn.pallas=true \
  > $R/a.log 2>&1; grep "^  {" $R/a.log; tail -3 $R/a.log | grep -i -B2 error
for f in $R/a/profile_sample_forward_bfloat16_pallas.json; do python3 -c "
import json; d=json.load(open('$f'))
for r in d['kernels'][:14]: print(f\"{r['ms_per_call']:7.3f} x{r['count_per_call']:4.0f} {r['name'][:90]}\")"; done
for v in "DDGJAX_MIX_WARPS=8" "DDGJAX_MIX_TILE=64" "DDGJAX_PAIR_MLP_STAGES=2 DDGJAX_MIX_STAGES=2"; do
 env $v python3 benchmarks/profile_ppgn.py --out $R/tune --dtypes bfloat16 --calls 3 --skip_train --skip_ceilings \
  --tag "_$(echo $v | tr ' =' '__')" --option model.ppgn.pallas=true > $R/tune.log 2>&1; grep '^  {' $R/tune.log
done
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
