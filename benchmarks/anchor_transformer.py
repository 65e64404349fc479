"""The anchor the GPU step is measured against: a plain PyTorch encoder-decoder of the same sizes, written the obvious
way (torch.nn.Transformer, tied embeddings, label-smoothed cross entropy, bf16 autocast, fused Adam), trained on
synthetic sentences of one length (no padding, so it does less work than a real batch).  benchmarks/gpu_step.py
times it eager and compiled beside the project's step; it runs on a CPU too (tests/core/test_anchor.py, tiny).
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Anchor(nn.Module):
    def __init__(self, vocab: int, d_model: int, d_ff: int, h: int, layers: int, dropout: float = 0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.core = nn.Transformer(d_model, h, layers, layers, d_ff, dropout, batch_first=True)
        self.out = nn.Linear(d_model, vocab, bias=False)
        self.out.weight = self.embed.weight
        self.scale = math.sqrt(d_model)
        self.register_buffer("pos", _sinusoids(1024, d_model), persistent=False)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        s = self.embed(src) * self.scale + self.pos[: src.shape[1]]
        t = self.embed(tgt) * self.scale + self.pos[: tgt.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        return self.out(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))


def _sinusoids(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


def anchor_step(vocab: int, d_model: int, d_ff: int, h: int, layers: int, tokens: int, length: int = 28,
                compiled: bool = False, device: str = "cuda", bf16: bool = True):  # fmt: skip
    """(step, params, target tokens per step): the anchor's training step at ``tokens`` target tokens per step."""
    torch.manual_seed(0)
    model = Anchor(vocab, d_model, d_ff, h, layers).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=device != "cpu" or None)
    batch = max(1, tokens // length)
    src = torch.randint(1, vocab, (batch, length), device=device)
    tgt = torch.randint(1, vocab, (batch, length + 1), device=device)

    def step():
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt[:, 1:].flatten(), label_smoothing=0.1)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return (torch.compile(step) if compiled else step), params, batch * length


def anchor_rate(vocab: int, d_model: int, d_ff: int, h: int, layers: int, tokens: int, length: int = 28,
                compiled: bool = False, steps: int = 10, warmup: int = 3, device: str = "cuda",
                bf16: bool = True) -> dict:  # fmt: skip
    """Target tokens/s of the anchor's training step at ``tokens`` target tokens per step (sentences of ``length``)."""
    fn, params, per_step = anchor_step(vocab, d_model, d_ff, h, layers, tokens, length, compiled, device, bf16)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = fn()
    sync()
    seconds = time.perf_counter() - t0
    rate = per_step * steps / seconds
    return {"compiled": compiled, "params": params, "tokens_per_step": per_step, "tokens_per_second": rate,
            "loss": float(loss.detach())}  # fmt: skip
