"""Encoder and decoder layers (paper section 3.1) with post- or pre-norm residuals.

Variants beyond the paper, so that modern choices can be compared on the same model: ``norm_type`` rmsnorm
(``torch.nn.RMSNorm``, scale only, the same eps as the LayerNorm) and ``activation`` gelu or swiglu in the
feed-forward layer.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .config import ModelConfig, ffn_inner
from .dropout import Dropout

NORM_EPS = 1e-5  # nn.LayerNorm's default, used by both kinds


def make_norm(kind: str, d_model: int) -> nn.Module:
    """LayerNorm (gain and bias: 2 d_model parameters) or RMSNorm (gain only: d_model)."""
    if kind == "rmsnorm":
        return nn.RMSNorm(d_model, eps=NORM_EPS)
    return nn.LayerNorm(d_model, eps=NORM_EPS)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2 with inner size d_ff (act: relu, the paper's, or gelu), or
    SwiGLU(x) = (silu(x W1 + b1) * (x W3 + b3)) W2 + b2 with inner size ``config.ffn_inner(d_ff, "swiglu")``
    = round(2/3 d_ff), so that its three matrices hold as many weights as relu's two at d_ff."""

    def __init__(self, d_model: int, d_ff: int, relu_dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.activation = activation
        inner = ffn_inner(d_ff, activation)
        self.w1 = nn.Linear(d_model, inner)
        self.w3 = nn.Linear(d_model, inner) if activation == "swiglu" else None
        self.w2 = nn.Linear(inner, d_model)
        self.dropout = Dropout(relu_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.w1(x)
        if self.activation == "swiglu":
            a = F.silu(a) * self.w3(x)
        elif self.activation == "gelu":
            a = F.gelu(a)
        else:
            a = torch.relu(a)
        return self.w2(self.dropout(a))


class Residual(nn.Module):
    """Norm(x + Dropout(Sublayer(x))) (post, the paper) or x + Dropout(Sublayer(Norm(x))) (pre)."""

    def __init__(self, d_model: int, P_drop: float, norm: str, norm_type: str = "layernorm"):
        super().__init__()
        self.norm = make_norm(norm_type, d_model)
        self.dropout = Dropout(P_drop)
        self.pre = norm == "pre"
        self.stream: Optional[torch.dtype] = None  # set_residual_dtype: the dtype the block's output is kept in

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre:
            y = x + self.dropout(sublayer(self.norm(x)))
        else:
            y = self.norm(x + self.dropout(sublayer(x)))
        if self.stream is not None and _autocast_on(y.device.type):
            return y.to(self.stream)  # under autocast only: an fp32 forward (export, a CPU decode) stays fp32
        return y


RESIDUAL_DTYPES = {"fp32": None, "bf16": torch.bfloat16}


def _autocast_on(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` (torch before 2.4 asks per device kind)."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4: no device argument
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


def set_residual_dtype(model: nn.Module, name: str) -> int:
    """Keep every residual block's output (the stream between sublayers, and its gradient) in ``name``'s dtype
    under autocast: with ``bf16`` the memory-bound kernels around each norm (dropout, residual add, the norm and
    their backward) read and write the stream in 2 bytes an element instead of 4, at bf16's rounding of the stream
    once a sublayer; ``fp32`` (the default) is autocast's own choice (the norms' fp32 outputs). Returns how many
    blocks it set."""
    dtype = RESIDUAL_DTYPES[name]
    blocks = [m for m in model.modules() if isinstance(m, Residual)]
    for m in blocks:
        m.stream = dtype
    return len(blocks)


def _attention(cfg: ModelConfig, self_attention: bool) -> MultiHeadAttention:
    return MultiHeadAttention(
        cfg.d_model,
        cfg.h,
        cfg.d_k,
        cfg.d_v,
        cfg.attention_dropout,
        cfg.scale_attention,
        self_attention,
        positional=cfg.positional if self_attention else "none",  # no positional term in cross-attention
        max_len=cfg.max_len,
    )


def _feed_forward(cfg: ModelConfig) -> PositionwiseFeedForward:
    return PositionwiseFeedForward(cfg.d_model, cfg.d_ff, cfg.relu_dropout, cfg.activation)


def _residual(cfg: ModelConfig) -> Residual:
    return Residual(cfg.d_model, cfg.P_drop, cfg.norm, cfg.norm_type)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = _attention(cfg, True)
        self.ff = _feed_forward(cfg)
        self.res1 = _residual(cfg)
        self.res2 = _residual(cfg)

    def forward(self, x: torch.Tensor, src_mask, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``src_mask``: the padding mask (B, 1, 1, S) or a packed buffer's Segments (``positions`` (1, S))."""
        x = self.res1(x, lambda y: self.self_attn(y, mask=src_mask, positions=positions))
        return self.res2(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = _attention(cfg, True)
        self.cross_attn = _attention(cfg, False)
        self.ff = _feed_forward(cfg)
        self.res1 = _residual(cfg)
        self.res2 = _residual(cfg)
        self.res3 = _residual(cfg)

    def forward(
        self,
        x: torch.Tensor,
        memory_kv: tuple,
        src_mask,
        cache: Optional[dict] = None,
        self_mask=None,
        positions: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """``src_mask``: the padding mask (B, 1, 1, S) or a packed buffer's cross-attention Segments, with
        ``self_mask`` its causal self-attention Segments and ``positions`` (1, T) its target positions."""
        causal = self_mask is None  # a packed buffer's Segments carry their own causality
        pos = positions
        x = self.res1(x, lambda y: self.self_attn(y, mask=self_mask, is_causal=causal, cache=cache, positions=pos))
        x = self.res2(x, lambda y: self.cross_attn(y, mask=src_mask, memory_kv=memory_kv))
        return self.res3(x, self.ff)
