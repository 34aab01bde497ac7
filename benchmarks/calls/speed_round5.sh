#!/bin/bash
# Issue 12, GPU call 6: (1) Ego-small paper config, one run vs 5 seeds in one program;
# (2) quality at the fast setting: Ego-small (the run just trained) and Planar-60 (the
# round-10 10-block model, trained in bfloat16) sampled in float32, bfloat16 (XLA) and
# bfloat16 + Pallas kernels.
set -u
python3 -m pip install -q --no-index --find-links .whl flax optax orbax-checkpoint chex ml_collections networkx absl-py 2>&1 | tail -2
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
R=$OUT/r5; mkdir -p $R runs
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $R/gpu.txt
timeout 300 python3 benchmarks/seeds_speed.py --out $R/seeds_speed.json --keep runs/seeds 2>&1 | tail -4
for v in "f32:--compute_dtype float32" "bf16:--compute_dtype bfloat16" "bf16_pallas:--compute_dtype bfloat16 --pallas"; do
  name=${v%%:*}; flags=${v#*:}
  for s in 0 1 2; do
    timeout 60 python3 sample.py --workdir runs/seeds/single --num_samples 256 --seed $s --protocol paper \
      $flags --out $R/ego/${name}_seed$s > $R/ego_${name}_$s.log 2>&1
  done
  python3 -c "
import json, glob
for f in sorted(glob.glob('$R/ego/${name}_seed*/eval.json')):
    d = json.load(open(f)); flat = {}
    for k, v in d.items():
        if isinstance(v, dict):
            flat.update({k + '.' + a: b for a, b in v.items() if isinstance(b, (int, float))})
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            flat[k] = v
    print('ego $name', f.split('/')[-2], {k: round(v, 5) for k, v in flat.items() if 'mmd' in k.lower() or k in ('average', 'avg', 'sampling_seconds')})
" 2>&1 | tail -3
done
mkdir -p runs/p60 && tar xzf .devdata/models/best_p60_d10.tar.gz -C runs/p60
for v in "f32:--compute_dtype float32" "bf16:--compute_dtype bfloat16" "bf16_pallas:--compute_dtype bfloat16 --pallas"; do
  name=${v%%:*}; flags=${v#*:}
  timeout 150 python3 benchmarks/vun_eval.py --workdir runs/p60/best_p60_d10 --checkpoint latest --ema \
    --validity planar --protocol paper --seeds 3 --num_samples 1024 --num_steps 32 \
    --option algorithm=2 --option grid=power:4 --no_graphs $flags --name p60_$name --out $R/p60 \
    > $R/p60_$name.log 2>&1; tail -2 $R/p60_$name.log
done
rm -rf $R/ego/*/*.png; cd $OUT && tar czf r5.tgz r5 && rm -rf r5
