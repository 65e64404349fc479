"""Positional encodings (paper section 3.5): sinusoids or learned embeddings."""

from __future__ import annotations

import math

import torch
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


class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        return self.embedding.weight[offset : offset + length]


def make_positions(kind: str, max_len: int, d_model: int) -> nn.Module:
    return SinusoidalPositions(max_len, d_model) if kind == "sinusoidal" else LearnedPositions(max_len, d_model)
