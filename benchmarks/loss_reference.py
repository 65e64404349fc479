"""The compiled label-smoothed loss with the target's logit read by a gather (its backward a zero-filled (n, V)
tensor scattered into) against the masked row sum transformer_core.loss.picked uses while compiling, side by side
in one run: forward and backward of the loss over bf16 logits of (rows, vocab), for loss_kernel lse (from the
log-sum-exp) and plain (from log_softmax), each variant compiled once at its shape and timed alternately.

    python benchmarks/loss_reference.py [--rows 4096] [--vocab 37000] [--repeat 5] [--threads 2]
        [--device cpu|cuda] [--dtype bf16|fp32] [--out benchmarks/results/loss_reference_cpu.txt]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.step_profile import cpu_flags  # noqa: E402
from transformer_core import loss as loss_module  # noqa: E402
from transformer_core.compiling import isa_cache_tag  # noqa: E402


def gathered(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """x[i, target[i]] by a gather, compiled or not (the reference before picked)."""
    return x.gather(1, target[:, None]).squeeze(1)


def loss_fn(kind: str):
    """The summed smoothed loss of ``kind`` as transformer_core.loss computes it (its target's logit read by
    whatever ``loss.picked`` is when the call traces: the benchmark sets it before each call)."""

    def fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if kind == "lse":
            loss, _ = loss_module.smoothed_terms_lse(logits, target, 0.1)
        else:
            loss, _ = loss_module.smoothed_terms(F.log_softmax(logits.float(), dim=-1), target, 0.1)
        return loss.sum()

    return fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=37000)
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds; each times every variant once")
    ap.add_argument("--steps", type=int, default=5, help="forward and backward passes a round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"], help="the logits' dtype")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    isa_cache_tag()  # kernels cached for one instruction set are not handed to another
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    logits = torch.randn(args.rows, args.vocab, generator=g).to(device, dtype).requires_grad_()
    target = torch.randint(0, args.vocab, (args.rows,), generator=g).to(device)
    masked = loss_module.picked
    refs = {"gather": gathered, "masked": masked}
    variants = {f"{kind} {name}": torch.compile(loss_fn(kind), dynamic=False) for kind in ("lse", "plain")
                for name in refs}  # fmt: skip
    results: dict[str, tuple] = {}
    eager = {}
    for kind in ("lse", "plain"):  # the eager loss and gradient each compiled variant is checked against
        logits.grad = None
        value = loss_fn(kind)(logits, target)
        value.backward()
        eager[kind] = (value.detach().float(), logits.grad.float().clone())
    for name, fn in variants.items():  # compile, and keep each variant's loss and gradient
        loss_module.picked = refs[name.split()[1]]
        logits.grad = None
        value = fn(logits, target)
        value.backward()
        results[name] = (value.detach().float(), logits.grad.float().clone())
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, fn in variants.items():
            loss_module.picked = refs[name.split()[1]]  # the same function its compiled code was traced with
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                logits.grad = None
                fn(logits, target).backward()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / args.steps)
    loss_module.picked = masked
    lines = [
        f"# {args.device}; CPU flags {cpu_flags()}; ATEN_CPU_CAPABILITY "
        f"{os.environ.get('ATEN_CPU_CAPABILITY', '-')}; torch {torch.__version__}; {args.threads} threads; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "$ python benchmarks/loss_reference.py " + " ".join(sys.argv[1:]),
        f"compiled forward and backward of the smoothed loss over {args.dtype} logits ({args.rows:,} x "
        f"{args.vocab:,}); median of {args.repeat} rounds of {args.steps} passes",
    ]
    for kind in ("lse", "plain"):
        before, after = np.median(times[f"{kind} gather"]), np.median(times[f"{kind} masked"])
        (lb, gb), (la, ga) = results[f"{kind} gather"], results[f"{kind} masked"]
        le, ge = eager[kind]
        rel = [abs(float(v - le)) / abs(float(le)) for v in (lb, la)]
        worst = [float((g - ge).abs().max()) for g in (gb, ga)]
        same = f"from eager: loss {rel[0]:.1e} / {rel[1]:.1e} relative, gradient {worst[0]:.1e} / {worst[1]:.1e}"
        lines.append(f"{kind}: gather {1000 * before:.1f} ms, masked {1000 * after:.1f} ms: "
                     f"{before / after:.2f}x ({same})")  # fmt: skip
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
