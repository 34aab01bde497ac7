# Sourced by the round-11 GPU drivers (benchmarks/round11_call{2,4,5,6}.sh) after they set
# OUT and the result folders they need. Sets RUNS, the XLA environment, T0 and
# records the card; defines:
#   elapsed                 seconds since T0
#   stop_at SECONDS PID...  SIGTERM every PID still running at SECONDS, give them 40 s
#                           together to finish their checkpoints, then SIGKILL. (SIGTERM, not SIGINT:
#                           background jobs of a non-interactive shell ignore SIGINT;
#                           the ddgjax CLIs turn SIGTERM into a clean interrupt.)
#   pack_sbm                the SBM workdir in <= 15 MiB parts ($OUT/sbm_ckpt.tar.gz.part_*;
#                           cat them | tar xz to resume elsewhere)
#   cache_cold_warm MIN MAX the Ego-small warm/cold compile-cache pair (below)
#   pack_results            $OUT/res as $OUT/results.tar.gz, and a listing
#   fit_sets LIMIT NAME...  our SBM fit (benchmarks/sbm_failures.py, against the test split)
#                           of each $OUT/res/samples/NAME_seed*.json set, side by side, into
#                           $OUT/res/fail/NAME.{json,md,log}; stopped at LIMIT seconds
#   step NAME MIN MAX CMD...  run CMD (output to $OUT/res/NAME.log) if MIN seconds are left
#                           before $HARD (set by the driver), for at most MAX seconds; its
#                           rc goes to $OUT/res/times.txt; with $FINAL set, $OUT/res is then
#                           packed into $FINAL/results.tar.gz (a call cut short keeps what
#                           finished: drivers that do this write $OUT in a scratch folder)
RUNS=runs/r11
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/res" "$RUNS"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/res/gpu.txt" 2>&1
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
stop_at() {
  local limit=$1; shift
  local p _
  any_alive() { for p in "$@"; do if kill -0 $p 2>/dev/null; then return 0; fi; done; return 1; }
  while [ $(elapsed) -lt "$limit" ] && any_alive "$@"; do sleep 2; done
  for p in "$@"; do kill -TERM $p 2>/dev/null; done   # all at once, one grace period
  for _ in $(seq 40); do any_alive "$@" || break; sleep 1; done
  for p in "$@"; do kill -KILL $p 2>/dev/null; wait $p 2>/dev/null; done
}
pack_sbm() { tar czf - -C $RUNS sbm_best | split -b 15m - "$OUT/sbm_ckpt.tar.gz.part_"; }
pack_results() {
  tar czf "$OUT/results.tar.gz" -C "$OUT" res && rm -rf "$OUT/res"
  echo "packed at $(elapsed) s"; ls -la "$OUT"
}
fit_sets() {
  local limit=$1; shift
  local name files fits=()
  mkdir -p "$OUT/res/fail"
  for name in "$@"; do
    files=$(ls $OUT/res/samples/${name}_seed*.json 2>/dev/null)
    if [ -n "$files" ]; then
      python benchmarks/sbm_failures.py --reference spectre_sbm:test --generated $files \
        --fit ddgjax --out $OUT/res/fail/$name > $OUT/res/fail/$name.log 2>&1 &
      fits+=($!)
    fi
  done
  [ ${#fits[@]} -gt 0 ] && stop_at "$limit" "${fits[@]}"
  grep -H "^generated" $OUT/res/fail/*.log
}
left() { echo $(( HARD - $(elapsed) )); }
step() {
  local name=$1 min=$2 max=$3; shift 3
  local l=$(left)
  if [ "$l" -lt "$min" ]; then echo "$name skipped at $(elapsed) s" >> "$OUT/res/times.txt"; return; fi
  timeout $(( l < max ? l : max )) "$@" > "$OUT/res/$name.log" 2>&1
  echo "$name rc=$? at $(elapsed) s" >> "$OUT/res/times.txt"
  if [ -n "${FINAL:-}" ]; then
    tar czf "$FINAL/results.tar.gz.tmp" -C "$OUT" res && mv "$FINAL/results.tar.gz.tmp" "$FINAL/results.tar.gz"
  fi
}
# cache_cold_warm MIN MAX: `step` the one Ego-small run of seeds_speed.py twice with JAX's
# persistent compilation cache in a fresh directory, every program cached however short
# its compile: seeds_cache_cold (filling it), then seeds_cache_warm.
cache_cold_warm() {
  rm -rf /tmp/ddgjax_jcache
  local k
  for k in cold warm; do
    JAX_COMPILATION_CACHE_DIR=/tmp/ddgjax_jcache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 step seeds_cache_$k "$1" "$2" \
      python benchmarks/seeds_speed.py --skip_multi --out "$OUT/res/seeds_cache_$k.json"
  done
}
