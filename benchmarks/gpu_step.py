"""One training step of a GPU profile's base row on a CUDA device: target tokens/s and MFU, eager and compiled.

The sweep planner sizes GPU trials with an assumed MFU (sweeps/plan/estimate.py, ``--mfu``); this measures it.  For
each ``--compile`` mode a fresh Trainer of the profile's base row (bf16 where the device has it, as precision auto
picks) trains ``--warmup`` steps (the first compiles), then ``--windows`` windows of ``--steps`` timed steps each
(the device synchronised at both ends of each); the rate reported is the best window's, and every window's is
printed: a compiled step can recompile for a batch shape it meets later (a minute each on an H200), which lands in
one window, not in the step's rate.  MFU = 6 x params x target tokens/s over the device's dense matrix-product
peak at that precision, measured in the same run (the best of an 8,192 cube and the model's own products at its
batch).

Beside them, the anchor (benchmarks/anchor_transformer.py: torch.nn.Transformer of the same sizes, tied
embeddings, label smoothing, bf16 autocast, fused Adam, synthetic sentences of 28 tokens at the profile's target
tokens per step), eager and compiled, and the ratio of the project's best step to each.  ``--loss-kernels`` runs each
compile mode with each output projection and loss (plain, or chunked: transformer_core/fused_loss.py).

    python benchmarks/gpu_step.py [--profile gpu] [--corpus bible-en-de] [--steps 20] [--windows 3] [--compile off,on]
                                  [--loss-kernels plain,chunked] [--no-anchor]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from anchor_transformer import anchor_rate  # noqa: E402
from step_profile import base_row_values, model_shapes  # noqa: E402

from sweeps.plan.device_bench import timed_windows  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def gpu_matmul_rate(m: int, k: int, n: int, dtype: torch.dtype, reps: int = 20) -> float:
    """FLOP/s of an (m, k) x (k, n) product on the GPU: the best of three timed blocks of ``reps``."""
    a, b = torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(k, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        torch.cuda.synchronize()
        best = max(best, 2.0 * m * k * n * reps / (time.perf_counter() - t))
    return best


def train_rate(values: dict, mode: str, warmup: int, steps: int, windows: int = 1, loss_kernel: str = "plain") -> dict:
    from transformer_core.run_config import make_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer

    torch.cuda.reset_peak_memory_stats()
    config = make_run_config({**values, "compile": mode, "seed": 1, "loss_kernel": loss_kernel})
    with tempfile.TemporaryDirectory(prefix="gpu-step-") as work:
        tr = Trainer(config, Path(work), JsonTracker(Path(work) / "t.jsonl"), None)
        warmup_s, rates = timed_windows(tr, warmup, steps, windows)  # `tsweep bench-device`'s loop
        rate, seconds, tokens = max(rates)
        return {
            "compile": tr.forward_loss.mode, "loss_kernel": tr.forward_loss.loss_kernel,
            "precision": tr.precision, "params": tr.params,
            "tokens_per_second": rate, "ms_per_step": 1000.0 * seconds / steps, "windows": [r[0] for r in rates],
            "tokens_per_step": tokens / steps, "warmup_seconds": warmup_s,
            "compile_seconds": tr.compile_seconds, "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per window")
    ap.add_argument("--windows", type=int, default=3, help="timed windows; the best one's rate is reported")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", default="off,on", help="comma list of compile modes, each its own Trainer")
    ap.add_argument("--loss-kernels", default="plain,chunked", help="comma list: plain, chunked")
    ap.add_argument("--no-anchor", dest="anchor", action="store_false", help="skip the nn.Transformer anchor")
    ap.add_argument("--json", default=None, help="write every figure here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_step.py: no CUDA device is visible (this benchmark measures a GPU's training step)")
    from transformer_core.data import load_corpus
    from transformer_core.run_config import parse_assignments

    values = base_row_values(args.profile, args.corpus, args.data_dir, parse_assignments([]))
    vocab = load_corpus(args.corpus, values["vocab"], args.data_dir).vocab_size
    name = torch.cuda.get_device_name()
    runs = [train_rate(values, mode, args.warmup, args.steps, args.windows, kernel)
            for mode in args.compile.split(",") for kernel in args.loss_kernels.split(",")]  # fmt: skip
    precision = runs[0]["precision"]
    dtype = DTYPES[precision]
    shapes = [(8192, 8192, 8192), *model_shapes(values, vocab)]
    rates = {f"{m}x{k}x{n}": gpu_matmul_rate(m, k, n, dtype) for m, k, n in shapes}
    peak = max(rates.values())
    print(f"{name}; torch {torch.__version__}; {platform.machine()}; profile {args.profile} base row, corpus "
          f"{args.corpus} (vocabulary {vocab}); {args.steps} timed steps after {args.warmup}")  # fmt: skip
    print(f"{precision} matrix-product peak {peak / 1e12:.0f} TFLOP/s (" +
          ", ".join(f"{s}: {r / 1e12:.0f}" for s, r in rates.items()) + ")")  # fmt: skip
    for r in runs:
        r["mfu"] = 6 * r["params"] * r["tokens_per_second"] / peak
        first = f", compile {r['compile_seconds']:.1f} s" if r["compile_seconds"] else ""
        print(f"compile {r['compile']}, loss {r['loss_kernel']}: {r['tokens_per_second']:,.0f} target tokens/s "
              f"({r['tokens_per_step']:,.0f} "
              f"per step, {r['ms_per_step']:.1f} ms), MFU {100 * r['mfu']:.1f}%, {r['params'] / 1e6:.1f}M params, "
              f"warm-up {r['warmup_seconds']:.1f} s{first}, peak memory {r['peak_memory_gib']:.1f} GiB; windows: "
              + ", ".join(f"{w:,.0f}" for w in r["windows"]))  # fmt: skip
    base = runs[0]["tokens_per_second"]
    for r in runs[1:]:
        print(f"compile {r['compile']}, loss {r['loss_kernel']} / compile {runs[0]['compile']}, loss "
              f"{runs[0]['loss_kernel']}: {r['tokens_per_second'] / base:.2f}x")  # fmt: skip
    anchors = []
    if args.anchor:
        sizes = dict(vocab=vocab, d_model=values["d_model"], d_ff=values["d_ff"], h=values["h"], layers=values["N"],
                     tokens=int(values["tokens_per_batch"]) * int(values.get("accumulate", 1)))  # fmt: skip
        best = max(runs, key=lambda r: r["tokens_per_second"])
        for compiled in (False, True):
            a = anchor_rate(**sizes, compiled=compiled, steps=args.steps, warmup=args.warmup)
            a["mfu"] = 6 * a["params"] * a["tokens_per_second"] / peak
            anchors.append(a)
            print(f"anchor nn.Transformer {'compiled' if compiled else 'eager'}: {a['tokens_per_second']:,.0f} target "
                  f"tokens/s ({a['tokens_per_step']:,} per step), MFU {100 * a['mfu']:.1f}%; best step / anchor "
                  f"{best['tokens_per_second'] / a['tokens_per_second']:.2f}x")  # fmt: skip
    if args.json:
        out = {"device": name, "torch": torch.__version__, "peak_flops": peak, "matmul": rates, "runs": runs,
               "anchors": anchors}  # fmt: skip
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
