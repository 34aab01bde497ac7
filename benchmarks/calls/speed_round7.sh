#!/bin/bash
# Issue 12, GPU call 8 (2-GPU machine): Planar-60 paper config, 400 epochs, on one GPU and on
# both (the data-parallel shard_map path), reference and fused PPGN blocks, bfloat16 too.
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$OUT/r7; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $R/gpu.txt
C=configs/paper.py:planar_60,ppgn,simple
for opts in "" "--option model.ppgn.fused=true" "--option model.compute_dtype=bfloat16 --option model.ppgn.fused=true"; do
  tag=$(echo "x$opts" | tr -c 'a-z0-9\n' '_')
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 benchmarks/epoch_times.py --epochs 400 $opts --out $R/one$tag.json $C 2>&1 | tail -1
  timeout 150 python3 benchmarks/epoch_times.py --epochs 400 $opts --out $R/two$tag.json $C 2>&1 | tail -1
done
cd $OUT && tar czf r7.tgz r7 && rm -rf r7
