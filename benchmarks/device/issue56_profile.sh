#!/usr/bin/env bash
# Issue 56's second device script, for a session that has run issue56.sh (or has under 7 minutes of device time):
# the gpu-marked tests with room to finish, where the packed step's GPU time goes against the compiled anchor's
# (benchmarks/gpu_kernels.py), then two trials sharing the GPU under MPS.  About 6 minutes:
#   run(command="bash benchmarks/device/issue56_profile.sh", carry=[".devdata/bible-en-de"], timeout_s=380)
# CPU check:  DRY=1 bash benchmarks/device/issue56_profile.sh
set -uo pipefail
export PYTHONPATH="$PWD" TSWEEP_DATA_DIR="${TSWEEP_DATA_DIR:-$PWD/.devdata}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/issue56-out}"
mkdir -p "$OUT"
PY="${PY:-python3}"
if [ -n "${DRY:-}" ]; then
  PY="${PY_DRY:-.venv/bin/python}"
  "$PY" benchmarks/gpu_kernels.py --dry-run --out "$OUT/gpu_kernels_dry.txt" > /dev/null 2>&1 || exit 1
  "$PY" benchmarks/gpu_candidates.py --dry-run --only MPS --share "packed graphs" --deadline 80 \
    --out "$OUT/gpu_mps_dry.txt" > /dev/null 2>&1 || exit 1
  tail -n +3 "$OUT/gpu_kernels_dry.txt" | head -3; tail -2 "$OUT/gpu_mps_dry.txt"
  exit 0
fi
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())" 2>/dev/null || echo gpu)
timeout 130 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/core/test_packing.py tests/core/test_attention_backends.py \
  > "$OUT/gpu_tests_$name.txt" 2>&1
tail -3 "$OUT/gpu_tests_$name.txt"
GPU_KERNELS_RAW="$OUT/gpu_kernels_raw_$name.txt" timeout 150 "$PY" benchmarks/gpu_kernels.py \
  --out "$OUT/gpu_kernels_$name.txt" 2>&1 | grep -v "Warning\|USDT\|record_function"
timeout 85 "$PY" benchmarks/gpu_candidates.py --only MPS --share "packed graphs" --deadline 80 \
  --out "$OUT/gpu_mps_$name.txt" 2>&1 | grep -v "Warning\|USDT"
true
