"""Attention within segments of a packed buffer (``data/packing.py``): each query sees only the keys of its own
sentence, causally on the decoder's self-attention.

Two ways compute it, both at one shape per trial:

- ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention-2 on CUDA) on the buffer as (tokens,
  heads, head size) with the segments' cumulative boundaries; no mask is built.  It has no dropout inside
  attention and takes one head size of at most 256 (a multiple of 8): q and k (or v) are zero-padded to the larger
  of d_k and d_v, which leaves every product and the output unchanged.
- ``mask``: ``scaled_dot_product_attention`` with a boolean (tokens x tokens) block-diagonal mask built from each
  token's segment: what a CPU computes, and the reference the equivalence tests hold varlen's layout to.

``packed_support`` says whether a row can be packed on a device and, where it cannot, why (the trial then trains
padded batches and says so in result.json).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

MAX_FLASH_HEAD = 256


@dataclass
class Segments:
    """Which keys each query of a packed buffer may attend to."""

    backend: str  # "varlen" or "mask"
    cu_q: torch.Tensor  # (segments + 1,) int32
    cu_k: torch.Tensor  # (segments + 1,) int32
    span: int  # the longest segment any batch of the trial can hold (a fixed int: one compiled shape)
    causal: bool
    mask: Optional[torch.Tensor] = None  # mask backend: (1, 1, Cq, Ck) bool, True where attention is allowed


def build_segments(
    backend: str,
    cu_q: torch.Tensor,
    cu_k: torch.Tensor,
    seg_q: torch.Tensor,
    seg_k: torch.Tensor,
    span: int,
    causal: bool,
) -> Segments:
    """The Segments of one attention kind (encoder self, decoder self with ``causal``, or cross)."""
    mask = None
    if backend == "mask":
        mask = seg_q[:, None] == seg_k[None, :]
        if causal:  # self-attention: segments coincide on both sides, so buffer order is sentence order
            n = seg_q.shape[0]
            idx = torch.arange(n, device=seg_q.device)
            mask = mask & (idx[None, :] <= idx[:, None])
        mask = mask[None, None]
    return Segments(backend, cu_q, cu_k, span, causal, mask)


def _padded_head(x: torch.Tensor, size: int) -> torch.Tensor:
    return x if x.shape[-1] == size else F.pad(x, (0, size - x.shape[-1]))


def flash_head_size(d_k: int, d_v: int) -> int:
    """The one head size varlen attention runs at: the larger of d_k and d_v, rounded up to a multiple of 8."""
    return -(-max(d_k, d_v) // 8) * 8


def _varlen_module():
    try:
        import torch.nn.attention.varlen as varlen
    except ImportError:
        return None
    return varlen


_VARLEN = _varlen_module()  # torch.nn.attention.varlen, or None in a torch without it
# how this torch's varlen_attn takes causality, read once here rather than inside a compiled step:
# ``is_causal`` (torch 2.10-2.11) or ``window_size`` (-1, 0)
CAUSAL_ARG = (
    "is_causal" if _VARLEN is not None and "is_causal" in inspect.signature(_VARLEN.varlen_attn).parameters
    else "window_size"
)  # fmt: skip


def _varlen_kwargs(causal: bool) -> dict:
    if CAUSAL_ARG == "is_causal":
        return {"is_causal": causal}
    return {"window_size": (-1, 0) if causal else (-1, -1)}


def segment_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float) -> torch.Tensor:
    """q (1, h, Cq, d_k), k (1, h, Ck, d_k), v (1, h, Ck, d_v) -> (1, Cq, h * d_v), attention within segments."""
    if seg.backend == "mask":
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=seg.mask, scale=scale)  # (1, h, Cq, d_v)
        return y.transpose(1, 2).flatten(2)
    d_v = v.shape[-1]
    size = flash_head_size(q.shape[-1], d_v)
    # (1, h, C, d) -> (C, h, d): the layout the projections wrote, so no copy where no padding is needed
    q, k, v = (_padded_head(t.transpose(1, 2)[0], size) for t in (q, k, v))
    attn = _VARLEN.varlen_attn  # type: ignore[union-attr]  # packed_support routes torches without it elsewhere
    y = attn(q, k, v, seg.cu_q, seg.cu_k, seg.span, seg.span, scale=scale, **_varlen_kwargs(seg.causal))
    return y[None, :, :, :d_v].flatten(2)  # (1, Cq, h * d_v)


def varlen_available() -> bool:
    return _VARLEN is not None


def packed_support(
    cfg, device: torch.device, task: str = "translation", precision: str = "bf16"
) -> tuple[Optional[str], str]:
    """(backend, why): the attention backend a packed step of this model runs on ``device``, or None and the
    reason it trains padded batches instead."""
    if task != "translation":
        return None, f"the {task} task trains padded batches"
    if cfg.positional == "alibi":
        return None, "alibi's distance bias is not a segment mask"
    if device.type != "cuda":
        return "mask", "block-diagonal mask (no varlen kernel off CUDA)"
    if not varlen_available():
        return None, f"torch {torch.__version__} has no torch.nn.attention.varlen"
    if precision != "bf16":
        return None, f"FlashAttention takes bf16 or fp16, not {precision}"
    if cfg.attention_dropout > 0:
        return None, "varlen attention has no dropout inside attention (attention_dropout > 0)"
    size = flash_head_size(cfg.d_k, cfg.d_v)
    if size > MAX_FLASH_HEAD:
        return None, f"head size {max(cfg.d_k, cfg.d_v)} is above FlashAttention's {MAX_FLASH_HEAD}"
    return "varlen", f"varlen FlashAttention at head size {size}"
