#!/usr/bin/env bash
# Issue 56's second device script, after issue56.sh on the same warm machine (its best_sets.txt in $OUT is gone
# there: pass the fastest single candidate's settings as SETS, e.g. SETS="--set packing=on --set compile=graphs
# --set accumulate=1 --set tokens_per_batch=25000 --set packed_attention=flex"):
#   run(command="SETS='...' bash benchmarks/device/issue56_profile.sh", carry=[".devdata/bible-en-de"], timeout_s=300)
# What it does, in about 4 minutes: where the packed step's GPU time goes with varlen and with FlexAttention
# (benchmarks/gpu_kernels.py; the compiled anchor beside the first), then `tsweep bench-device --share 2` with
# SETS under MPS (its device-bench.json is what `tsweep plan --profile gpu` reads).
# CPU check:  DRY=1 bash benchmarks/device/issue56_profile.sh
set -uo pipefail
export PYTHONPATH="$PWD" TSWEEP_DATA_DIR="${TSWEEP_DATA_DIR:-$PWD/.devdata}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/issue56-out}"
mkdir -p "$OUT"
PY="${PY:-python3}"
SETS="${SETS:-}"
# the step whose kernels are profiled (compile=on: the kernels a CUDA graph replays, without the graph); e.g. the
# stack with a bf16 stream: PROFILE_SETS="... --set loss_kernel=lse --set residual_dtype=bf16"
PROFILE_SETS="${PROFILE_SETS:---set packing=on --set compile=on --set accumulate=1 --set tokens_per_batch=25000
  --set packed_attention=flex}"
if [ -n "${DRY:-}" ]; then
  PY="${PY_DRY:-.venv/bin/python}"
  export TSWEEP_DATA_DIR=$(mktemp -d) TSWEEP_BIBLE_DB="$PWD/tests/fixtures/bible-mini.db"
  "$PY" benchmarks/gpu_kernels.py --dry-run --out "$OUT/gpu_kernels_dry.txt" > /dev/null 2>&1 || exit 1
  "$PY" -m sweeps.cli bench-device --profile smoke --steps 3 --windows 2 --warmup 2 --share 2 $SETS \
    > "$OUT/bench_device_dry.txt" 2>&1 || { tail -3 "$OUT/bench_device_dry.txt"; exit 1; }
  tail -n +3 "$OUT/gpu_kernels_dry.txt" | head -2; tail -2 "$OUT/bench_device_dry.txt"
  exit 0
fi
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())" 2>/dev/null || echo gpu)
GPU_KERNELS_RAW="$OUT/gpu_kernels_raw_$name.txt" timeout 110 "$PY" benchmarks/gpu_kernels.py $PROFILE_SETS \
  --no-anchor --out "$OUT/gpu_kernels_flex_$name.txt" 2>&1 | grep -v "Warning\|USDT\|record_function"
mps=$(mktemp -d)
mkdir -p "$mps/pipe" "$mps/log"
export CUDA_MPS_PIPE_DIRECTORY="$mps/pipe" CUDA_MPS_LOG_DIRECTORY="$mps/log"
nvidia-cuda-mps-control -d && echo "MPS daemon started"
timeout 130 "$PY" -m sweeps.cli bench-device --profile gpu --steps 10 --windows 3 --warmup 5 --share 2 $SETS \
  > "$OUT/bench_device_$name.txt" 2>&1
tail -6 "$OUT/bench_device_$name.txt"
echo quit | nvidia-cuda-mps-control
cp "$TSWEEP_DATA_DIR/device-bench.json" "$OUT/device-bench_$name.json" 2>/dev/null
true
