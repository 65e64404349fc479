"""Training-step throughput with each scaled_dot_product_attention kernel on CPU.

Why it exists: under CPU bf16 autocast PyTorch's default (flash) kernel was
measured much slower than its math kernel for the small heads of the cpu
profile, so transformer_core.attention takes the math kernel there.  This
prints, for several head shapes of a d_model 128, N 3 model (the cpu profile's
base width) and for the paper's d_model 512 width, target tokens/s of a full
training step (forward, backward, Adam) with the default kernel and with the
math kernel forced, in one run, and their ratio.

    python benchmarks/attention_backends.py [--threads 1] [--steps 6]
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import transformer_core as tc
from transformer_core import attention

V = 2000
SHAPES = [  # d_model, d_ff, N, h, d_k, d_v
    (128, 512, 3, 1, 128, 128),
    (128, 512, 3, 8, 16, 16),
    (128, 512, 3, 8, 4, 16),
    (128, 512, 3, 32, 4, 4),
    (512, 2048, 1, 8, 64, 64),
]


def tokens_per_second(shape, kernel: str, precision: str, steps: int) -> float:
    d, ff, n, h, dk, dv = shape
    torch.manual_seed(0)
    model = tc.build_model(tc.model_config("base", N=n, d_model=d, d_ff=ff, h=h, d_k=dk, d_v=dv), V).train()
    opt = tc.make_adam(model.parameters())
    B, S, T = 52, 40, 42  # ~2,048 target tokens, Bible-like lengths
    src = torch.randint(4, V, (B, S))
    src[:, 30:][torch.rand(B, 10) < 0.3] = 0  # some source padding, so masks are exercised
    tgt = torch.randint(4, V, (B, T + 1))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(src, tgt[:, :-1])
        loss, _, ntok = tc.label_smoothed_nll(logits, tgt[:, 1:], 0.1)
        opt.zero_grad(set_to_none=True)
        (loss / ntok).backward()
        opt.step()

    # "default": PyTorch's own kernel choice (what the model did before it special-cased CPU bf16)
    saved = attention.LOW_PRECISION
    attention.LOW_PRECISION = () if kernel == "default" else saved
    try:
        with sdpa_kernel(SDPBackend.MATH) if kernel == "math" else nullcontext():
            step(), step()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            return B * T * steps / (time.perf_counter() - t0)
    finally:
        attention.LOW_PRECISION = saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"training step, {args.threads} thread(s), ~2,184 target tokens per step, torch {torch.__version__}")
    print(
        f"{'precision':9} {'d_model':>7} {'N':>2} {'h':>3} {'d_k':>4} {'d_v':>4}"
        f" {'default tok/s':>14} {'math tok/s':>11} {'math/default':>13}"
    )
    for precision in ("bf16", "fp32"):
        for shape in SHAPES:
            a = tokens_per_second(shape, "default", precision, args.steps)
            b = tokens_per_second(shape, "math", precision, args.steps)
            d, _, n, h, dk, dv = shape
            print(f"{precision:9} {d:7d} {n:2d} {h:3d} {dk:4d} {dv:4d} {a:14.0f} {b:11.0f} {b / a:13.2f}", flush=True)


if __name__ == "__main__":
    main()
