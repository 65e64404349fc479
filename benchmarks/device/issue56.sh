#!/usr/bin/env bash
# Issue 56's one prepared device script: run first whenever a session has a GPU, from the repository root.
#
# Before it, on the CPU machine: prepare the corpus at the gpu profile's vocabulary into .devdata (ignored by git:
# add /.devdata/ to .git/info/exclude) and carry only the prepared corpus
#   TSWEEP_DATA_DIR=.devdata .venv/bin/tsweep data prepare bible-en-de --vocab 37000
#   run(command="bash benchmarks/device/issue56.sh", carry=[".devdata/bible-en-de"], timeout_s=580)
# and check it end to end on the CPU first:  DRY=1 bash benchmarks/device/issue56.sh
# A machine starts in about 40 s, so this leaves time for issue56_profile.sh (kernels, bench-device) after it.
#
# What it does, in about 9 minutes: the gpu-marked tests (varlen and FlexAttention against the padded step, a CUDA
# graph step), then benchmarks/gpu_candidates.py under a deadline: padded eager and compiled, packed graphs with
# varlen and with flex, the anchor, trials sharing the GPU under MPS and time-sliced, then the other candidates.
# Tables go to $OUT (the device tool brings them back) and are copied into benchmarks/results/ by hand with the
# reading.
set -uo pipefail
export PYTHONPATH="$PWD" TSWEEP_DATA_DIR="${TSWEEP_DATA_DIR:-$PWD/.devdata}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/issue56-out}"
mkdir -p "$OUT"
PY="${PY:-python3}"
DEADLINE="${DEADLINE:-340}"
if [ -n "${DRY:-}" ]; then
  PY="${PY_DRY:-.venv/bin/python}"
  export TSWEEP_DATA_DIR=$(mktemp -d) TSWEEP_BIBLE_DB="$PWD/tests/fixtures/bible-mini.db"
  "$PY" benchmarks/gpu_candidates.py --dry-run --deadline 300 --out "$OUT/gpu_candidates_dry.txt" \
    --best-sets "$OUT/best_sets.txt" || exit $?
  exit 0
fi
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv > "$OUT/device_$name.txt" 2>&1
timeout 150 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/core/test_packing.py tests/core/test_attention_backends.py \
  > "$OUT/gpu_tests_$name.txt" 2>&1
tail -3 "$OUT/gpu_tests_$name.txt"
timeout $((DEADLINE + 40)) "$PY" benchmarks/gpu_candidates.py --corpus bible-en-de --deadline "$DEADLINE" \
  --out "$OUT/gpu_candidates_$name.txt" --json "$OUT/gpu_candidates_$name.json" --best-sets "$OUT/best_sets.txt"
true
