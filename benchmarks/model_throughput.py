"""Training-step throughput: our Transformer vs torch.nn.Transformer, same config, same batches.

Config: d_model 256, h 4, d_ff 1024, N 3, vocabulary 8,000, 4,096 target tokens
per step (128 sentences x 32 tokens), forward + backward + Adam.  Prints target
tokens/s for each model in fp32 and bf16 autocast and the ratio ours / torch.

    python benchmarks/model_throughput.py [--steps 12] [--threads N]
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from torch import nn

import transformer_core as tc

V, D, H, FF, N, B, T = 8000, 256, 4, 1024, 3, 128, 32


class TorchBaseline(nn.Module):
    """What a user would write around nn.Transformer: embeddings, sinusoids, the stack, a projection."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D, padding_idx=0)
        self.register_buffer("pe", tc.positional.sinusoid_table(512, D))
        self.core = nn.Transformer(D, H, N, N, FF, dropout=0.1, batch_first=True)
        self.proj = nn.Linear(D, V, bias=False)
        self.proj.weight = self.embed.weight

    def forward(self, src, tgt):
        s = self.embed(src) * math.sqrt(D) + self.pe[: src.shape[1]]
        t = self.embed(tgt) * math.sqrt(D) + self.pe[: tgt.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        out = self.core(
            s, t, tgt_mask=mask, src_key_padding_mask=src == 0, memory_key_padding_mask=src == 0, tgt_is_causal=True
        )
        return self.proj(out)


def ours():
    return tc.build_model(tc.model_config("base", N=N, d_model=D, d_ff=FF, h=H, d_k=D // H, d_v=D // H), V)


def step_fn(model, opt, bf16):
    def step(src, tgt_in, tgt_out):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in)
        loss, _, n = tc.label_smoothed_nll(logits, tgt_out, 0.1)
        opt.zero_grad(set_to_none=True)
        (loss / n).backward()
        opt.step()

    return step


def measure(make, bf16, batches, warmup=2):
    torch.manual_seed(0)
    model = make().train()
    step = step_fn(model, tc.make_adam(model.parameters()), bf16)
    for b in batches[:warmup]:
        step(*b)
    t0 = time.perf_counter()
    for b in batches[warmup:]:
        step(*b)
    dt = time.perf_counter() - t0
    tokens = sum(int((b[2] != 0).sum()) for b in batches[warmup:])
    return tokens / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(args.steps + 2):
        src = torch.randint(3, V, (B, T), generator=g)
        tgt = torch.randint(3, V, (B, T + 1), generator=g)
        batches.append((src, tgt[:, :-1], tgt[:, 1:]))
    from transformer_core.device import cpu_bf16_speedup

    speedup = cpu_bf16_speedup()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()}"
        f" threads, {args.steps} timed steps of {B * T} target tokens; "
        f"bf16/fp32 matmul speed on this CPU {speedup:.2f}x"
    )
    for bf16 in (False, True):
        name = "bf16 autocast" if bf16 else "fp32"
        # without native bf16 a step takes about a minute: time one step after one warm-up step
        use = batches if (not bf16 or speedup > 0.5) else batches[:2]
        warm = 2 if use is batches else 1
        # alternate the two models so that drift of the machine hits both alike
        a = measure(ours, bf16, use, warm)
        b = measure(TorchBaseline, bf16, use, warm)
        if use is batches:
            a, b = (a + measure(ours, bf16, use, warm)) / 2, (b + measure(TorchBaseline, bf16, use, warm)) / 2
        print(f"{name:14s} ours {a:8.0f} tok/s   nn.Transformer {b:8.0f} tok/s   ratio {a / b:.2f}x")


if __name__ == "__main__":
    main()
