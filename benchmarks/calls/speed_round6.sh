#!/bin/bash
# Issue 12, GPU call 7 (one GPU): Ego-small one run vs 5 seeds in one program, and Ego-small
# MMDs sampled in float32 / bfloat16 / bfloat16 + Pallas (3 seeds x 256 graphs each).
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$OUT/r6; mkdir -p $R runs
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $R/gpu.txt
timeout 330 python3 benchmarks/seeds_speed.py --out $R/seeds_speed.json --keep runs/seeds > $R/seeds.log 2>&1; tail -4 $R/seeds.log
for v in "f32:--compute_dtype float32" "bf16:--compute_dtype bfloat16" "bf16_pallas:--compute_dtype bfloat16 --pallas"; do
  name=${v%%:*}; flags=${v#*:}
  for s in 0 1 2; do
    timeout 60 python3 sample.py --workdir runs/seeds/single --num_samples 256 --seed $s --protocol paper \
      $flags --out $R/ego/${name}_seed$s > $R/ego_${name}_$s.log 2>&1 || tail -3 $R/ego_${name}_$s.log
  done
done
python3 - <<PY
import glob, json
for f in sorted(glob.glob("$R/ego/*/eval.json")):
    d = json.load(open(f))
    print(f.split("/")[-2], json.dumps({k: v for k, v in d.items() if not isinstance(v, (dict, list))})[:400])
PY
rm -f $R/ego/*/*.png; cd $OUT && tar czf r6.tgz r6 && rm -rf r6
