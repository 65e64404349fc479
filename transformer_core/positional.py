"""Positional information: added to the embeddings (the paper's section 3.5) or applied inside attention.

``sinusoidal`` and ``learned`` are added to the token embeddings (``make_positions``).  ``rope`` and ``alibi``
act in self-attention (``attention.py`` calls ``Rotary`` and ``alibi_bias``); ``none`` adds nothing, so the
decoder's only sense of order is its causal mask.

- RoPE (Su et al. 2021): each head's queries and keys (size d_k, even) are rotated by angles
  ``pos * theta_i`` with ``theta_i = 10000^(-2i/d_k)``, in the "rotate half" layout (dimension i is paired
  with i + d_k/2).  The score q_m . k_n then depends on the positions only through m - n.
- ALiBi (Press et al. 2022): ``-m_head * |i - j|`` is added to the attention logits, with the geometric slopes
  of the paper (``2^(-8k/h)`` for k = 1..h where h is a power of two, interleaved otherwise).  The decoder is
  causal, so this is the paper's ``-m (i - j)``; the encoder uses the symmetric distance.

Cross-attention gets no positional term with rope or alibi (source and target positions are not on one
axis; T5 and the relative-position encoder-decoders do the same).  Positions are absolute from the start of
the sequence: in cached decoding the new query sits at position ``step`` and cached keys keep the rotation of
the position they were computed at.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinusoid_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same)."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div)
    return table.float()


class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.register_buffer("table", sinusoid_table(max_len, d_model), persistent=False)

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        """(length, d_model) encodings of positions offset .. offset + length - 1."""
        return self.table[offset : offset + length]

    def at(self, positions: torch.Tensor) -> torch.Tensor:
        """(..., d_model) encodings of the positions given per token (a packed buffer's)."""
        return F.embedding(positions, self.table)


class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        return self.embedding.weight[offset : offset + length]

    def at(self, positions: torch.Tensor) -> torch.Tensor:
        return self.embedding(positions)


class NoPositions(nn.Module):
    """Nothing added to the embeddings (rope and alibi act in attention; none has no positions at all)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("zero", torch.zeros(()), persistent=False)

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        return self.zero  # broadcasts: x + positions(...) is x

    def at(self, positions: torch.Tensor) -> torch.Tensor:
        return self.zero


def make_positions(kind: str, max_len: int, d_model: int) -> nn.Module:
    """The module whose (length, d_model) output is added to the embeddings; a zero for rope, alibi, none."""
    if kind == "sinusoidal":
        return SinusoidalPositions(max_len, d_model)
    if kind == "learned":
        return LearnedPositions(max_len, d_model)
    return NoPositions()


# RoPE ---------------------------------------------------------------------------------------------------


def rotary_tables(max_len: int, d_k: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of pos * theta_i, (max_len, d_k): each of the d_k / 2 angles twice (rotate-half layout)."""
    inv_freq = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # theta_i, (d_k / 2,)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Rotary(nn.Module):
    """Rotates (B, h, T, d_k) queries or keys by their absolute positions offset .. offset + T - 1."""

    def __init__(self, max_len: int, d_k: int):
        super().__init__()
        cos, sin = rotary_tables(max_len, d_k)
        self.register_buffer("cos", cos, persistent=False)  # not in checkpoints: recomputed from the config
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.shape[-2]
        cos = self.cos[offset : offset + T].to(x.dtype)
        sin = self.sin[offset : offset + T].to(x.dtype)
        return x * cos + rotate_half(x) * sin

    def at(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """(1, h, C, d_k) rotated by the positions (1, C) given per token (a packed buffer's)."""
        cos = F.embedding(positions, self.cos).to(x.dtype)[:, None]  # (1, 1, C, d_k)
        sin = F.embedding(positions, self.sin).to(x.dtype)[:, None]
        return x * cos + rotate_half(x) * sin


# ALiBi --------------------------------------------------------------------------------------------------


def alibi_slopes(h: int) -> torch.Tensor:
    """The ALiBi paper's head slopes: 2^(-8k/h), k = 1..h, for h a power of two; otherwise those of the
    power of two below h, then every other slope of twice that many (the reference implementation's rule)."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    if h & (h - 1) == 0:
        return torch.tensor(power_of_two(h))
    n = 2 ** math.floor(math.log2(h))
    return torch.tensor(power_of_two(n) + power_of_two(2 * n)[0::2][: h - n])


def alibi_bias(
    slopes: torch.Tensor, q_len: int, k_len: int, offset: int, causal: bool, dtype: torch.dtype
) -> torch.Tensor:
    """Additive logits (1, h, q_len, k_len): -slope * |i - j| for query i = offset + t and key j; with
    ``causal``, -inf where j > i.  Positions are absolute, so a cached step (offset = past length) gets the
    same row as the full recomputation."""
    device = slopes.device
    i = torch.arange(offset, offset + q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    dist = (i - j).abs().to(torch.float32)
    bias = -slopes.to(torch.float32)[:, None, None] * dist  # (h, q_len, k_len)
    if causal:
        bias = bias.masked_fill(j > i, float("-inf"))
    return bias.unsqueeze(0).to(dtype)
