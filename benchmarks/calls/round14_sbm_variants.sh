#!/usr/bin/env bash
# Round 14 (issue 13): four SPECTRE SBM training variants side by side, one per GPU of a
# 4-GPU machine (CUDA_VISIBLE_DEVICES=k), each configs/best.py:spectre_sbm with training
# seed 1, validation (our SBM fit, 128 samples) every 250 epochs, the sampler logit scale
# 0.9 on the power:2 grid, up to 2500 epochs; the variants of $VARIANTS (NAME:OVERRIDES,
# |-separated):
#   ctrl    the recipe as it is
#   wd      AdamW, weight decay 0.1
#   unif    the uniform training grid (more training at high noise, where the partition
#           forms) instead of power:2
#   wdunif  both
# A call resumes each workdir ($RUNS/NAME) that an earlier call on the same (warm) machine
# left, else starts it. Training stops with SIGTERM at $HARD_SECONDS - $SAMPLE_SECONDS
# (default 110 s; checkpoints stay complete); then every variant samples 5 seeds x 40 graphs at 64 steps from its
# best_val (EMA), graphs only (graph-tool validity and MMDs later on a CPU:
# benchmarks/check_samples.py). CONFIRM=1 also samples the round-13 run's best_val
# (carried .devdata/sbm_r11/sbm_best) 5 x 40 with the same sampler on GPU 0, beside the
# first variant's training.
# With PACK_BEST=K the K variants with the best validation keys also come back as
# $OUT/ckpt_NAME.tar.gz (config, dataset, metrics and the best_val checkpoint; in 15 MiB
# parts if larger than 16 MB).
# $OUT: results.tar.gz (res/: logs, metrics, samples, times) and the checkpoint tars.
# GRID (default power:2) and SEED (default 1) change the sampling grid of validation and
# of the final samples, and the training seed, for every variant; SAMPLE_STEPS (default
# 64) the final samples' number of steps and LOGIT_SCALE (default 0.9, the recipe's; 1 for
# many-step samples, where the scale adds too many edges) their logit scale.
# GPUS: the cards to use (comma-separated, default all; variant k on the k-th mod their count).
# EXTRA_ALL: more overrides for every variant (a CPU dry run: a tiny model, few epochs).
# Usage: CALL=1 bash benchmarks/calls/round14_sbm_variants.sh OUT
set -uo pipefail
OUT=$1
source "$(dirname "$0")/gpu_call_common.sh"
RUNS=${RUNS_DIR:-runs/r14}
HARD=${HARD_SECONDS:-530}
CALL=${CALL:-1}
SAMPLE=${SAMPLE_SECONDS:-110}
mkdir -p $RUNS "$OUT/res/samples"
GRID=${GRID:-power:2}
SAMPLER="--option logit_scale=${LOGIT_SCALE:-0.9} --option grid=$GRID"
COMMON="--config.train.seed=${SEED:-1} --config.validation.every_epochs=250 \
 --config.train.checkpoint_every_epochs=50 --config.sample.grid=$GRID \
 --config.train.num_epochs=${EPOCHS:-2500} ${EXTRA_ALL:-}"
IFS='|' read -ra variants <<< "${VARIANTS:-ctrl:|wd:--config.train.weight_decay=0.1|unif:--config.diffusion.train_grid=uniform|wdunif:--config.train.weight_decay=0.1 --config.diffusion.train_grid=uniform}"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$ngpu" -ge 1 ] || ngpu=1
# GPUS (e.g. "2,3"): the cards to use, variant k on the k-th (mod their count); default all
IFS=',' read -ra gpus <<< "${GPUS:-$(seq -s, 0 $(( ngpu - 1 )))}"
ngpu=${#gpus[@]}
if [ "${CONFIRM:-0}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=${gpus[0]} timeout 150 python benchmarks/vun_eval.py \
    --workdir .devdata/sbm_r11/sbm_best --checkpoint best_val --ema --validity none \
    --protocol none --seeds 5 --num_samples 40 --num_steps 64 $SAMPLER \
    --name spectre_sbm_best_power2 --out "$OUT/res/samples" > "$OUT/res/vun_best_power2.log" 2>&1 &
  confirm_pid=$!
fi
pids=(); names=(); k=0
for v in "${variants[@]}"; do
  IFS=':' read -r name extra <<< "$v"
  names+=("$name")
  echo "$name: GPU ${gpus[$(( k % ngpu ))]}, start at step $(ls $RUNS/$name/checkpoints/latest 2>/dev/null | sort -n | tail -1)" >> "$OUT/res/times.txt"
  CUDA_VISIBLE_DEVICES=${gpus[$(( k % ngpu ))]} python train.py --config configs/best.py:spectre_sbm \
    --workdir $RUNS/$name --quiet $COMMON $extra > "$OUT/res/train_${name}_c$CALL.log" 2>&1 &
  pids+=($!); k=$(( k + 1 ))
done
stop_at $(( HARD - SAMPLE )) "${pids[@]}"
echo "training stopped at $(elapsed) s" >> "$OUT/res/times.txt"
[ -n "${confirm_pid:-}" ] && stop_at $(( HARD - SAMPLE )) $confirm_pid
pids=(); k=0
for name in "${names[@]}"; do
  cp $RUNS/$name/metrics.jsonl "$OUT/res/metrics_${name}.jsonl" 2>/dev/null
  CUDA_VISIBLE_DEVICES=${gpus[$(( k % ngpu ))]} python benchmarks/vun_eval.py --workdir $RUNS/$name \
    --checkpoint best_val --ema --validity none --protocol none --seeds 5 --num_samples 40 \
    --num_steps ${SAMPLE_STEPS:-64} $SAMPLER --name sbm14_${name}_c$CALL --out "$OUT/res/samples" \
    > "$OUT/res/vun_${name}_c$CALL.log" 2>&1 &
  pids+=($!); k=$(( k + 1 ))
done
stop_at $(( HARD - 15 )) "${pids[@]}"
echo "sampled at $(elapsed) s" >> "$OUT/res/times.txt"
# the validation record of each best_val (the selection key: 1 - valid, then avg MMD)
python - "$RUNS" "${names[@]}" > "$OUT/res/best_val_c$CALL.json" <<'EOF'
import json, sys
from ddgjax import checkpoints
out = {}
for name in sys.argv[2:]:
    w = f"{sys.argv[1]}/{name}"
    try:
        out[name] = {"step": checkpoints.latest_step(w, "best_val"),
                     **checkpoints.restore_meta(w, "best_val")}
    except Exception as e:  # noqa: BLE001 (a variant that never validated)
        out[name] = {"error": repr(e)}
print(json.dumps(out, indent=1, default=str))
EOF
if [ "${PACK_BEST:-0}" -gt 0 ]; then
  python -c "
import json, sys
d = json.load(open(sys.argv[1]))
keys = {n: tuple(m['validation_key']) for n, m in d.items() if 'validation_key' in m}
print(' '.join(sorted(keys, key=keys.get)[:int(sys.argv[2])]))" \
    "$OUT/res/best_val_c$CALL.json" "$PACK_BEST" > "$OUT/res/packed.txt"
  for name in $(cat "$OUT/res/packed.txt"); do
    tar czf "$OUT/ckpt_$name.tar.gz" -C $RUNS $name/config.json $name/dataset.json \
      $name/metrics.jsonl $name/checkpoints/best_val
    # a file over 16 MiB does not come back: then 15 MiB parts (cat them | tar xz)
    if [ $(stat -c %s "$OUT/ckpt_$name.tar.gz") -gt 16000000 ]; then
      split -b 15m "$OUT/ckpt_$name.tar.gz" "$OUT/ckpt_$name.tar.gz.part_" && rm "$OUT/ckpt_$name.tar.gz"
    fi
  done
fi
pack_results
