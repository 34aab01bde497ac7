#!/bin/bash
# Issue 12, GPU call 5: the peer benchmark (ddgjax vs PyTorch eager / torch.compile, same
# card, same process), with the Pallas sampler and the fused train step as ddgjax variants.
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p $OUT/r4
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/r4/gpu.txt
timeout 560 python3 benchmarks/bench_speed.py --out $OUT/r4/bench_speed.json --tf32 on --no_batched \
  --ddgjax_option model.ppgn.pallas=true --ddgjax_train_option model.ppgn.fused=true 2>&1 | tail -25
