#!/usr/bin/env bash
# Issue 56's one prepared device script: run first whenever a session has a GPU, from the repository root.
#
# Before it, on the CPU machine: prepare the corpus at the gpu profile's vocabulary into .devdata (ignored by git:
# add /.devdata/ to .git/info/exclude) and carry only the prepared corpus
#   TSWEEP_DATA_DIR=.devdata .venv/bin/tsweep data prepare bible-en-de --vocab 37000
#   run(command="bash benchmarks/device/issue56.sh", carry=[".devdata/bible-en-de"], timeout_s=540)
# and check it end to end on the CPU first:  DRY=1 bash benchmarks/device/issue56.sh
#
# What it does, in about 8 minutes: the gpu-marked tests (FlashAttention varlen against the padded step, a CUDA
# graph step), then benchmarks/gpu_candidates.py (every candidate step side by side, the anchor, trials sharing
# the GPU with and without MPS) under a deadline, then `tsweep bench-device --share 3` with the fastest single
# candidate's settings (its device-bench.json is what `tsweep plan --profile gpu` reads).  Tables go to $OUT (the
# device tool brings them back) and are copied into benchmarks/results/ by hand with the reading.
set -uo pipefail
export PYTHONPATH="$PWD" TSWEEP_DATA_DIR="${TSWEEP_DATA_DIR:-$PWD/.devdata}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/issue56-out}"
mkdir -p "$OUT"
PY="${PY:-python3}"
DEADLINE="${DEADLINE:-280}"
if [ -n "${DRY:-}" ]; then
  PY="${PY_DRY:-.venv/bin/python}"
  export TSWEEP_DATA_DIR=$(mktemp -d) TSWEEP_BIBLE_DB="$PWD/tests/fixtures/bible-mini.db"
  "$PY" benchmarks/gpu_candidates.py --dry-run --deadline 300 --out "$OUT/gpu_candidates_dry.txt" \
    --best-sets "$OUT/best_sets.txt" || exit $?
  "$PY" -m sweeps.cli bench-device --profile smoke --steps 3 --windows 2 --warmup 2 --share 2 \
    $(cat "$OUT/best_sets.txt") > "$OUT/bench_device_dry.txt" 2>&1 || { tail -3 "$OUT/bench_device_dry.txt"; exit 1; }
  tail -5 "$OUT/bench_device_dry.txt"
  exit 0
fi
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv > "$OUT/device_$name.txt" 2>&1
timeout 80 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/core/test_packing.py tests/core/test_attention_backends.py \
  > "$OUT/gpu_tests_$name.txt" 2>&1
tail -3 "$OUT/gpu_tests_$name.txt"
timeout $((DEADLINE + 50)) "$PY" benchmarks/gpu_candidates.py --corpus bible-en-de --deadline "$DEADLINE" \
  --out "$OUT/gpu_candidates_$name.txt" --json "$OUT/gpu_candidates_$name.json" --best-sets "$OUT/best_sets.txt"
sets=$(cat "$OUT/best_sets.txt" 2>/dev/null)
echo "bench-device with: ${sets:-the profile defaults}"
timeout 110 "$PY" -m sweeps.cli bench-device --profile gpu --steps 10 --windows 3 --warmup 5 --share 3 $sets \
  > "$OUT/bench_device_$name.txt" 2>&1
tail -6 "$OUT/bench_device_$name.txt"
cp "$TSWEEP_DATA_DIR/device-bench.json" "$OUT/device-bench_$name.json" 2>/dev/null
true
