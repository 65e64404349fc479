#!/usr/bin/env bash
# Issue 56's one prepared device script: run first whenever a session has a GPU, from the repository root.
#
# Before it, on the CPU machine: prepare the corpus at the gpu profile's vocabulary into .devdata (ignored by git:
# add /.devdata/ to .git/info/exclude), carry only the prepared corpus, and check the script end to end on the CPU:
#   TSWEEP_DATA_DIR=.devdata .venv/bin/tsweep data prepare bible-en-de --vocab 37000
#   DRY=1 bash benchmarks/device/issue56.sh
# 15 minutes of device time hold the machine's start (about 40 s) and two calls, each stopping its own parts by
# TOTAL seconds (a part that would not fit says so and is skipped; what ran is in $OUT already):
#   run(command="TOTAL=480 GPU_TESTS=1 bash benchmarks/device/issue56.sh", carry=[".devdata/bible-en-de"],
#       timeout_s=520)
#   run(command="TOTAL=<what is left, less 30> BENCH='<best_sets.txt of the first>' \
#       bash benchmarks/device/issue56.sh", carry=[".devdata/bible-en-de"], timeout_s=<TOTAL + 20>)
# and afterwards, locally, from the device-bench.json the second brings back (copied into a data directory):
#   tsweep plan sweeps/specs/table3.yaml --profile gpu
#
# The first call (no BENCH):
# 1. the learning pair (item 4), first because it gates a CUDA default: 3 seeds of the gpu profile's base row with
#    today's step (padded, eager, 2 x 12,500 tokens) against 3 with the candidate default (the padded stream's very
#    batches packed, packing=on, in FlexAttention's tiles where the buffer has room; compiled and replayed as a
#    CUDA graph, 1 x 25,000; losses read once a logging window and computed from the log-sum-exp: the stack of
#    the candidates below, so that its learning is what this pair measures), LEARN_STEPS steps, all six at once
#    under an MPS daemon of the script's own (private pipe directory, stopped afterwards); each trial's line is
#    kept as it finishes.  Greedy final decoding (beam=1, max_extra=0) for both sides: the comparison is dev
#    cross-entropy.  SKIP_LEARN=1 leaves it out.
# 2. with GPU_TESTS=1, the gpu-marked tests (about 100 s on an H200; they gate any CUDA default; GPU_TESTS=only:
#    nothing else).
# 3. benchmarks/gpu_candidates.py in what is left (often nothing, after the two above), CANDIDATES in its order:
#    the padded eager baseline, the Flex graph step with tiles, loss_sync=window and loss_kernel=lse (the stack),
#    the anchor compiled and eager, ... (CANDIDATES= (empty) runs every candidate; a row past the deadline says so).
# The second call (BENCH = the --set arguments of the fastest single trial: the first call's best_sets.txt, or the
# stack's: --set packing=on --set compile=graphs --set packed_attention=flex --set tokens_per_batch=25000
# --set accumulate=1 --set loss_sync=window --set loss_kernel=lse):
# 1. the baseline, the stack, the anchor compiled and eager, and the stack at FlexAttention's 64-token tiles in
#    one run (ANCHOR_CANDIDATES; empty: none), within half the time left: the issue's first target as one run's
#    ratio;
# 2. tsweep bench-device at BENCH: the base row alone and 2 trials sharing under MPS, then big alone, each record
#    copied to $OUT as it lands (what tsweep plan reads); with GPU_TESTS=1, the gpu tests in what is left.
# Tables go to $OUT (the device tool brings them back) and are copied into benchmarks/results/ by hand with the
# reading.
set -uo pipefail
export PYTHONPATH="$PWD" TSWEEP_DATA_DIR="${TSWEEP_DATA_DIR:-$PWD/.devdata}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/issue56-out}"
mkdir -p "$OUT"
PY="${PY:-python3}"
TOTAL="${TOTAL:-540}"
# six trials of 500 steps: about 200 s of the GPU at the step times measured on the H200 (83 ms padded, 47 ms
# packed), with the compile and the final evaluation inside LEARN_TIMEOUT; a trial past it leaves no line
LEARN_STEPS="${LEARN_STEPS:-500}"
LEARN_TIMEOUT="${LEARN_TIMEOUT:-330}"
CANDIDATES="${CANDIDATES-padded 2x12.5k,packed graphs flex stack,anchor}"
ANCHOR_CANDIDATES="${ANCHOR_CANDIDATES-padded 2x12.5k,packed graphs flex stack,packed graphs flex64 stack,anchor}"
CANDIDATE_SETS=(compile=graphs packed_attention=flex tokens_per_batch=25000 accumulate=1 loss_sync=window
  loss_kernel=lse)
start=$(date +%s)
mps=""
left() { echo $((TOTAL - ($(date +%s) - start))); }
mps_start() {
  # an MPS daemon of this script's own: a private pipe and log directory, no compute-mode change; none where the
  # machine has no MPS (mps stays empty and the processes share the GPU time-sliced)
  command -v nvidia-cuda-mps-control > /dev/null || return 0
  mps=$(mktemp -d) && mkdir -p "$mps/pipe" "$mps/log"
  if CUDA_MPS_PIPE_DIRECTORY="$mps/pipe" CUDA_MPS_LOG_DIRECTORY="$mps/log" nvidia-cuda-mps-control -d; then
    echo "MPS daemon started ($mps/pipe)"
  else
    rm -rf "$mps"
    mps=""
  fi
}
mps_stop() {
  [ -n "$mps" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY="$mps/pipe" nvidia-cuda-mps-control
  rm -rf "$mps"
  mps=""
}
trap mps_stop EXIT
gpu_tests() {
  # the gpu-marked tests, within $1 seconds
  timeout "$1" "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/core/test_packing.py \
    tests/core/test_packing_blocks.py tests/core/test_loss_sync.py tests/core/test_attention_backends.py \
    tests/core/test_residual_dtype.py \
    > "$OUT/gpu_tests_$name.txt" 2>&1
  tail -1 "$OUT/gpu_tests_$name.txt"
}
bench_models() {
  # tsweep bench-device at the settings $BENCH: the base row alone and 2 trials sharing, then big alone, all under
  # one MPS daemon of this script's own where the machine has one (so that the two single-trial rates compare);
  # each part within the time left; the stored record is copied to $OUT after each, the lines as they come
  local sets profile="${BENCH_PROFILE:-gpu}" steps="${BENCH_STEPS:-10}" log="$OUT/bench_device_${name:-dry}.txt" t
  read -r -a sets <<< "$BENCH"
  local bench=("$PY" -m sweeps.cli bench-device --profile "$profile" --corpus bible-en-de --steps "$steps"
    --windows 3 --warmup 5)
  mps_start
  export CUDA_MPS_PIPE_DIRECTORY="${mps:+$mps/pipe}"
  {
    for part in "--share 2" "--preset big"; do
      t=$(($(left) - 10))
      [ "$t" -gt 150 ] && t=150
      if [ "$t" -lt 60 ]; then
        echo "tsweep bench-device $part: skipped ($(left) s left of TOTAL=$TOTAL)"
        continue
      fi
      echo "\$ tsweep ${bench[*]:3} $part ${sets[*]}  (MPS: ${mps:-none}; within $t s)"
      # shellcheck disable=SC2086  # $part is two words
      timeout "$t" "${bench[@]}" $part "${sets[@]}" 2>&1
      cp "$TSWEEP_DATA_DIR/device-bench.json" "$OUT/device-bench_${name:-dry}.json" 2> /dev/null
    done
  } | grep --line-buffered -v "Warning\|warn" > "$log"
  unset CUDA_MPS_PIPE_DIRECTORY
  mps_stop
  grep "skipped" "$log" || true
  grep -c "stored in" "$log" | sed 's/$/ of 2 measurements stored/'
}
if [ -n "${DRY:-}" ]; then
  PY="${PY_DRY:-.venv/bin/python}"
  name=dry
  export TSWEEP_DATA_DIR=$(mktemp -d) TSWEEP_BIBLE_DB="$PWD/tests/fixtures/bible-mini.db"
  "$PY" benchmarks/packing_learning.py --dry-run --seeds 2 --parallel 2 --set beam=1 max_extra=0 \
    --packed-set compile=graphs packed_attention=flex loss_sync=window loss_kernel=lse --trial-timeout 200 \
    --out "$OUT/packing_learning_dry.txt" \
    > /dev/null || exit $?
  tail -1 "$OUT/packing_learning_dry.txt"
  "$PY" benchmarks/gpu_candidates.py --dry-run --deadline 200 --only "$CANDIDATES,$ANCHOR_CANDIDATES" \
    --out "$OUT/gpu_candidates_dry.txt" --best-sets "$OUT/best_sets.txt" > /dev/null 2>&1 || exit $?
  tail -n +4 "$OUT/gpu_candidates_dry.txt"
  TOTAL=$((TOTAL + $(date +%s) - start))  # the parts above are the dry run's own: bench_models keeps TOTAL
  BENCH_PROFILE=smoke BENCH_STEPS=2 BENCH="${BENCH:---set compile=off}" PY="$PY" bench_models
  exit 0
fi
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv > "$OUT/device_$name.txt" 2>&1
if [ "${GPU_TESTS:-}" = only ]; then
  gpu_tests $(($(left) - 10))
  exit 0
fi
if [ -n "${BENCH:-}" ]; then
  # the second call: the stack beside the anchor in one run (its kernels are in inductor's cache by now, unless the
  # machine is fresh), then what tsweep plan reads, then the tests in what is left
  if [ -n "$ANCHOR_CANDIDATES" ]; then
    deadline=$(($(left) / 2))
    [ "$deadline" -gt 150 ] && deadline=150
    timeout $((deadline + 40)) "$PY" benchmarks/gpu_candidates.py --corpus bible-en-de --deadline "$deadline" \
      --only "$ANCHOR_CANDIDATES" --out "$OUT/gpu_anchor_$name.txt" \
      2>&1 | grep -v "Warning\|warn\|record_function"
  fi
  bench_models
  if [ -n "${GPU_TESTS:-}" ]; then
    if [ "$(left)" -gt 110 ]; then gpu_tests $(($(left) - 10)); else echo "gpu tests: skipped ($(left) s left)"; fi
  fi
  exit 0
fi
# 1. the learning pair, under an MPS daemon of this script's own
if [ -z "${SKIP_LEARN:-}" ]; then
  mps_start
  CUDA_MPS_PIPE_DIRECTORY="${mps:+$mps/pipe}" timeout "$LEARN_TIMEOUT" \
    "$PY" benchmarks/packing_learning.py --profile gpu --corpus bible-en-de --steps "$LEARN_STEPS" --seeds 3 \
    --parallel 6 --set beam=1 max_extra=0 --packed-set "${CANDIDATE_SETS[@]}" \
    --trial-timeout $((LEARN_TIMEOUT - 10)) --out "$OUT/packing_learning_$name.txt" | tail -7
  mps_stop
fi
# 2. the gpu tests, where asked for (before the candidates: the second call runs the stack beside the anchor)
if [ -n "${GPU_TESTS:-}" ]; then
  t=$(($(left) - 10))
  [ "$t" -gt 240 ] && t=240
  if [ "$t" -gt 80 ]; then gpu_tests "$t"; else echo "gpu tests: skipped ($(left) s left)"; fi
fi
# 3. the candidates, in the time left
rest=$(($(left) - 40))
if [ "$rest" -gt 60 ]; then
  timeout $((rest + 30)) "$PY" benchmarks/gpu_candidates.py --corpus bible-en-de --deadline "$rest" \
    --only "$CANDIDATES" \
    --out "$OUT/gpu_candidates_$name.txt" --json "$OUT/gpu_candidates_$name.json" --best-sets "$OUT/best_sets.txt" \
    2>&1 | grep -v "Warning\|warn\|record_function"
else
  echo "no time left for the candidates ($rest s)"
fi
true
