"""Where a CUDA training step's GPU time goes, kernel by kernel: the project's step beside the compiled anchor.

For each subject (the gpu profile's base row with ``--set`` overrides, default packed and compiled at one 25K
micro-batch; and benchmarks/anchor_transformer.py compiled at the same sizes), it trains ``--warmup`` untimed
steps, times ``--steps`` steps (wall ms per step, device synchronised at both ends), then records as many under
torch.profiler and sums each CUDA kernel's time per step into classes by kernel name:

    matrix products   cuBLAS / CUTLASS / nvjet kernels (the linear layers, forward and backward)
    attention         FlashAttention (varlen or SDPA) kernels, forward and backward
    fused reductions  Triton reduction kernels (layer norm, softmax of the loss, sums), torch.compile's own
    fused pointwise   Triton pointwise kernels (dropout, residual adds, activations, casts)
    optimizer         fused Adam (multi_tensor_apply) kernels
    other aten        every other kernel (eager element-wise, copies, fills, index ops)

"GPU busy" is the sum of kernel time over the wall time of the profiled steps: well below 100% means the GPU waits
for the host (launch overhead, host syncs, data).  The top kernels by time are listed for each.  Writes the table
to ``--out`` with the device, torch version and date.  ``--dry-run`` runs on the CPU at the smoke profile (no CUDA
kernels are recorded: it checks the script end to end).

    python benchmarks/gpu_kernels.py [--set packing=on --set compile=on ...] [--steps 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT))

CLASSES = ("matrix products", "attention", "fused reductions", "fused pointwise", "optimizer", "other aten")
DEFAULT_SETS = ["packing=on", "compile=on", "accumulate=1", "tokens_per_batch=25000"]


def kernel_class(name: str) -> str:
    low = name.lower()
    if "flash" in low or "fmha" in low or "attention" in low:
        return "attention"
    if any(k in low for k in ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_")):
        return "matrix products"
    if "multi_tensor" in low or "adam" in low:
        return "optimizer"
    if low.startswith("triton_red") or low.startswith("triton_per"):
        return "fused reductions"
    if low.startswith("triton"):
        return "fused pointwise"
    return "other aten"


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def kernels(step, steps: int, device: str) -> tuple[dict[str, list[float]], float]:
    """{kernel name: [total us, count]} over ``steps`` profiled calls of ``step``, and their wall seconds."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    _sync(device)
    with profile(activities=acts) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        wall = time.perf_counter() - t0
    if device == "cuda" and os.environ.get("GPU_KERNELS_RAW"):  # torch's own table beside ours, to check the sums
        with open(os.environ["GPU_KERNELS_RAW"], "a") as f:
            f.write(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=30) + "\n")
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        # CUDA events, less the profiler's own annotations on the GPU's timeline (Optimizer.step#Adam.step)
        if e.device_type == torch.autograd.DeviceType.CUDA and "#" not in e.name:
            out[e.name][0] += float(e.time_range.elapsed_us())
            out[e.name][1] += 1
    return out, wall


def timed(step, warmup: int, steps: int, device: str) -> tuple[float, float]:
    """(warm-up seconds, wall ms per step over ``steps`` timed steps)."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(device)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return warm, 1000 * (time.perf_counter() - t0) / steps


def report(name: str, warm: float, ms: float, tokens: float, params: int, ks: dict, wall: float, steps: int,
           peak: float, top: int) -> list[str]:  # fmt: skip
    per = {k: (v[0] / 1000 / steps, v[1] / steps) for k, v in ks.items()}  # ms and launches per step
    busy = sum(v[0] for v in per.values())
    mfu = 6 * params * tokens / (ms / 1000) / peak if peak else float("nan")
    lines = [f"## {name}: {ms:.1f} ms per step ({tokens:,.0f} target tokens, {tokens / ms * 1000:,.0f} tokens/s, "
             f"MFU {100 * mfu:.1f}%), warm-up {warm:.1f} s; profiled {steps} steps: {wall / steps * 1000:.1f} ms "
             f"each, kernels {busy:.1f} ms ({100 * busy / (wall / steps * 1000):.0f}% GPU busy), "
             f"{sum(v[1] for v in per.values()):.0f} kernels per step"]  # fmt: skip
    by = defaultdict(lambda: [0.0, 0.0])
    for k, (t, c) in per.items():
        by[kernel_class(k)][0] += t
        by[kernel_class(k)][1] += c
    for c in CLASSES:
        t, n = by.get(c, (0.0, 0.0))
        lines.append(f"  {c:<18} {t:8.2f} ms  {100 * t / busy if busy else 0:5.1f}%  {n:6.0f} kernels")
    lines.append("  top kernels (ms per step, launches per step, class):")
    for k, (t, c) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"    {t:7.2f} ms {c:5.0f}x  {kernel_class(k):<16} {k[:110]}")
    return lines


def ours(args, device: str):
    from step_profile import base_row_values

    from transformer_core.run_config import make_run_config, parse_assignments
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer

    sets = parse_assignments(args.set or DEFAULT_SETS)  # {key: value text}; make_run_config reads the texts
    if args.dry_run:
        sets.update(tokens_per_batch=str(min(int(sets.get("tokens_per_batch", 512)), 512)), device="cpu", threads="1")
    config = make_run_config({**base_row_values(args.profile, args.corpus, args.data_dir, sets), "seed": 1,
                              "steps": 10_000})  # fmt: skip
    work = tempfile.mkdtemp(prefix="gpu-kernels-")
    tr = Trainer(config, Path(work), JsonTracker(Path(work) / "t.jsonl"), None)
    state = {"tokens": 0}

    def step() -> None:
        t0 = tr.tokens
        tr.train_step()
        state["tokens"] = tr.tokens - t0

    return step, tr.params, state, " ".join(f"{k}={v}" for k, v in sets.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--set", action="append", default=None, help=f"key=value (default: {' '.join(DEFAULT_SETS)})")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-anchor", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.dry_run:
        args.profile = "smoke"
        os.environ.setdefault("TSWEEP_BIBLE_DB", str(ROOT / "tests" / "fixtures" / "bible-mini.db"))
        args.data_dir = args.data_dir or tempfile.mkdtemp(prefix="gpu-kernels-data-")
        args.steps, args.warmup = min(args.steps, 2), min(args.warmup, 2)
    elif not torch.cuda.is_available():
        raise SystemExit("gpu_kernels.py: no CUDA device is visible (run with --dry-run to check it on a CPU)")
    device = "cpu" if args.dry_run else "cuda"
    from gpu_candidates import device_line, matmul_peak

    peak, how = matmul_peak(args.dry_run)
    head = [device_line(args.dry_run), "$ python benchmarks/gpu_kernels.py " + " ".join(sys.argv[1:])]
    lines = [f"matrix-product peak {peak / 1e12:.3f} TFLOP/s ({how})"]

    def flush() -> None:
        print("\n".join(lines), flush=True)
        if args.out:
            Path(args.out).write_text("\n".join(head + lines) + "\n")

    step, params, state, what = ours(args, device)
    warm, ms = timed(step, args.warmup, args.steps, device)
    ks, wall = kernels(step, args.steps, device)
    lines += report(f"project step ({what})", warm, ms, state["tokens"], params, ks, wall, args.steps, peak,
                    args.top)  # fmt: skip
    flush()
    lines.clear()
    if not args.no_anchor:
        from anchor_transformer import anchor_step
        from step_profile import base_row_values

        from transformer_core.data import load_corpus

        values = base_row_values(args.profile, args.corpus, args.data_dir, {})
        vocab = load_corpus(args.corpus, values["vocab"], args.data_dir).vocab_size
        tokens = 512 if args.dry_run else 25_000
        fn, aparams, per_step = anchor_step(vocab, values["d_model"], values["d_ff"], values["h"], values["N"],
                                            tokens, compiled=True, device=device, bf16=not args.dry_run)  # fmt: skip
        warm, ms = timed(fn, args.warmup, args.steps, device)
        ks, wall = kernels(fn, args.steps, device)
        lines += report("anchor compiled", warm, ms, per_step, aparams, ks, wall, args.steps, peak, args.top)
        if args.out:  # the project's rows were written above; the anchor's are appended
            prev = Path(args.out).read_text()
            Path(args.out).write_text(prev + "\n".join(lines) + "\n")
        print("\n".join(lines), flush=True)
    print(f"{datetime.now(timezone.utc):%H:%M:%S} done; {platform.node()}", flush=True)


if __name__ == "__main__":
    main()
