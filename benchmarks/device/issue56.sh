#!/usr/bin/env bash
# Issue 56's one prepared device script: run first whenever a session has a GPU, from the repository root.
#
# Before it, on the CPU machine: prepare the corpus at the gpu profile's vocabulary into .devdata and carry it
#   TSWEEP_DATA_DIR=.devdata .venv/bin/tsweep data prepare bible-en-de --vocab 37000
#   run(command="bash benchmarks/device/issue56.sh", carry=[".devdata"], timeout_s=560)
# and check it end to end on the CPU first:  DRY=1 bash benchmarks/device/issue56.sh
#
# What it does, in about 8 minutes: the gpu-marked tests (FlashAttention varlen against the padded step, a CUDA
# graph step), then benchmarks/gpu_candidates.py (every candidate step side by side, the anchor, trials sharing
# the GPU with and without MPS) under a 400 s deadline.  Tables go to $OUT (the device tool brings them back) and
# are copied into benchmarks/results/ by hand with the reading.
set -uo pipefail
export PYTHONPATH="$PWD" TSWEEP_DATA_DIR="${TSWEEP_DATA_DIR:-$PWD/.devdata}"
OUT="${OUT:-/tmp/issue56-out}"
mkdir -p "$OUT"
PY="${PY:-python3}"
if [ -n "${DRY:-}" ]; then
  PY="${PY_DRY:-.venv/bin/python}"
  "$PY" benchmarks/gpu_candidates.py --dry-run --deadline 300 --out "$OUT/gpu_candidates_dry.txt"
  exit $?
fi
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv > "$OUT/device_$name.txt" 2>&1
timeout 120 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/core/test_packing.py tests/core/test_attention_backends.py \
  > "$OUT/gpu_tests_$name.txt" 2>&1
tail -3 "$OUT/gpu_tests_$name.txt"
timeout 460 "$PY" benchmarks/gpu_candidates.py --corpus bible-en-de --deadline 400 \
  --out "$OUT/gpu_candidates_$name.txt" --json "$OUT/gpu_candidates_$name.json" 2>&1 | tail -40
