"""Why torch.compile trains the cpu profile slower than eager on a CPU: the kernels that store a boolean mask.

A compiled training step saves, for its backward, the mask of every ReLU (``y <= 0``) and of every dropout.
Inductor's C++ kernel for such a mask is far slower on a CPU than eager's; the same kernel producing floats is
not.  This times each on one thread at the shape of the cpu profile's feed-forward activations (12 sentences x
45 tokens x d_ff 512), eager against compiled (dynamic shapes, as ``compile=on`` builds the step), side by side,
and, for the scale of the loss, the whole feed-forward layer trained (forward and backward) each way.  Last, the
eager dropout masks themselves: torch's ``F.dropout`` against transformer_core.dropout's int32 draws, at the
shape of one residual dropout (540 tokens x d_model 128), forward and backward.

    python benchmarks/compile_masks.py [--shape 12,45,512] [--repeat 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from step_profile import cpu_flags  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformer_core.compiling import isa_cache_tag  # noqa: E402


def rate(fn, *args, repeat: int) -> float:
    """Microseconds per call, after ten untimed calls (compiling happens there)."""
    for _ in range(10):
        fn(*args)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return (time.perf_counter() - t0) / repeat * 1e6


def mask(y):
    return y <= 0


def relu_and_mask(y):
    r = torch.relu(y)
    return r, r <= 0


def relu_scaled(y):
    return torch.relu(y) * 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="12,45,512")
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    isa_cache_tag()  # kernels cached for one instruction set are not handed to another
    shape = tuple(int(s) for s in args.shape.split(","))
    y = torch.randn(*shape)
    print(f"one thread, shape {shape}, torch {torch.__version__}, CPU flags {cpu_flags()}")
    print(f"{'kernel':<34} {'eager us':>9} {'compiled us':>12} {'compiled / eager':>17}")
    for name, fn in (("y <= 0 (a bool mask)", mask), ("relu, and its bool mask", relu_and_mask),
                     ("relu x 2 (floats only)", relu_scaled)):  # fmt: skip
        eager = rate(fn, y, repeat=args.repeat)
        compiled = rate(torch.compile(fn, dynamic=True), y, repeat=args.repeat)
        print(f"{name:<34} {eager:9.0f} {compiled:12.0f} {compiled / eager:16.1f}x")
    d_in = shape[-1] // 4
    w1 = torch.randn(d_in, shape[-1], requires_grad=True)
    w2 = torch.randn(shape[-1], d_in, requires_grad=True)
    x = torch.randn(*shape[:-1], d_in)

    def ffn(x):
        return (torch.relu(x @ w1) @ w2).sum()

    compiled_ffn = torch.compile(ffn, dynamic=True)
    eager = rate(lambda: ffn(x).backward(), repeat=args.repeat // 2)
    compiled = rate(lambda: compiled_ffn(x).backward(), repeat=args.repeat // 2)
    print(f"{'feed-forward layer, trained':<34} {eager:9.0f} {compiled:12.0f} {compiled / eager:16.1f}x")

    from transformer_core.dropout import cpu_dropout

    h = torch.randn(540, 128, requires_grad=True)
    grad = torch.randn(540, 128)
    torchs = rate(lambda: torch.nn.functional.dropout(h, 0.1, True).backward(grad), repeat=args.repeat)
    int32 = rate(lambda: cpu_dropout(h, 0.1).backward(grad), repeat=args.repeat)
    print(f"dropout p=0.1 of (540, 128), forward and backward: torch's bernoulli_ masks {torchs:.0f} us, int32 draws "
          f"{int32:.0f} us ({torchs / int32:.2f}x faster)")  # fmt: skip


if __name__ == "__main__":
    main()
