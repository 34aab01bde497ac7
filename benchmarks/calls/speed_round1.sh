#!/bin/bash
# Issue 12, GPU call 2: the fused block against the reference (profile), an XLA flag,
# and the max-N table. One GPU; writes under $OUT/r1 and tars it.
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt
python3 benchmarks/profile_ppgn.py --out $R/fused --dtypes bfloat16,float32 --calls 5 \
  --skip_ceilings --tag _fused --option model.ppgn.fused=true 2>&1 | grep -A12 "^== " > $R/fused.txt
XLA_FLAGS=--xla_gpu_triton_gemm_any=true python3 benchmarks/profile_ppgn.py --out $R/triton_any \
  --dtypes bfloat16 --calls 5 --skip_ceilings --tag _fused_triton_any --option model.ppgn.fused=true \
  2>&1 | grep -A12 "^== " > $R/triton_any.txt
XLA_FLAGS=--xla_gpu_triton_gemm_any=true python3 benchmarks/profile_ppgn.py --out $R/triton_any_ref \
  --dtypes bfloat16 --calls 5 --skip_ceilings --tag _ref_triton_any \
  2>&1 | grep -A12 "^== " > $R/triton_any_ref.txt
cat $R/fused.txt $R/triton_any.txt $R/triton_any_ref.txt | grep "^== "
timeout 330 python3 benchmarks/max_nodes.py --out $R/max_nodes.json --nodes 128,187,256,320,384,448,512,640,768,1024 \
  --batch 32 --dtypes bfloat16,float32 --run_steps 1 --option model.ppgn.fused=true 2>&1 | tail -8
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
