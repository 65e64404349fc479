"""Encoder and decoder layers (paper section 3.1) with post- or pre-norm residuals."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config import ModelConfig


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, inner size d_ff."""

    def __init__(self, d_model: int, d_ff: int, relu_dropout: float = 0.0):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(relu_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(torch.relu(self.w1(x))))


class Residual(nn.Module):
    """LayerNorm(x + Dropout(Sublayer(x))) (post, the paper) or x + Dropout(Sublayer(LayerNorm(x))) (pre)."""

    def __init__(self, d_model: int, P_drop: float, norm: str):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(P_drop)
        self.pre = norm == "pre"

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def _attention(cfg: ModelConfig, self_attention: bool) -> MultiHeadAttention:
    return MultiHeadAttention(
        cfg.d_model, cfg.h, cfg.d_k, cfg.d_v, cfg.attention_dropout, cfg.scale_attention, self_attention
    )


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = _attention(cfg, True)
        self.ff = PositionwiseFeedForward(cfg.d_model, cfg.d_ff, cfg.relu_dropout)
        self.res1 = Residual(cfg.d_model, cfg.P_drop, cfg.norm)
        self.res2 = Residual(cfg.d_model, cfg.P_drop, cfg.norm)

    def forward(self, x: torch.Tensor, src_mask: Optional[torch.Tensor]) -> torch.Tensor:
        x = self.res1(x, lambda y: self.self_attn(y, mask=src_mask))
        return self.res2(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = _attention(cfg, True)
        self.cross_attn = _attention(cfg, False)
        self.ff = PositionwiseFeedForward(cfg.d_model, cfg.d_ff, cfg.relu_dropout)
        self.res1 = Residual(cfg.d_model, cfg.P_drop, cfg.norm)
        self.res2 = Residual(cfg.d_model, cfg.P_drop, cfg.norm)
        self.res3 = Residual(cfg.d_model, cfg.P_drop, cfg.norm)

    def forward(
        self, x: torch.Tensor, memory_kv: tuple, src_mask: Optional[torch.Tensor], cache: Optional[dict] = None
    ) -> torch.Tensor:
        x = self.res1(x, lambda y: self.self_attn(y, is_causal=True, cache=cache))
        x = self.res2(x, lambda y: self.cross_attn(y, mask=src_mask, memory_kv=memory_kv))
        return self.res3(x, self.ff)
