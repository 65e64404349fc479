"""Attention within segments of a packed buffer (``data/packing.py``): each query sees only the keys of its own
sentence, causally on the decoder's self-attention.

Two ways compute it, both at one shape per trial:

- ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention-2 on CUDA) on the buffer as (tokens,
  heads, head size) with the segments' cumulative boundaries; no mask is built.  It has no dropout inside
  attention and takes one head size of at most 256 (a multiple of 8): q and k (or v) are zero-padded to the larger
  of d_k and d_v, which leaves every product and the output unchanged.
- ``flex``: FlexAttention (``torch.nn.attention.flex_attention``, Triton kernels under torch.compile) with a block
  mask built straight from the segments' ids: a query block visits only the key blocks whose sentences it holds
  (sentences are contiguous and in order in the buffer), and the segment test runs inside the kernel.  Short
  sentences share one 128-row tile here, where varlen gives each sentence a tile of its own.  Chosen with the
  run-only knob ``packed_attention``: ``flex`` at FlexAttention's own tiles of 128 tokens, ``flex64`` at 64-token
  tiles (fewer keys a query meets: benchmarks/packing_tiles.py; on CUDA the kernels' tile sizes are set to
  divide 64 by ``compiling.flex_tiles``, since Hopper's default backward tiles of 128 would not).
- ``mask``: ``scaled_dot_product_attention`` with a boolean (tokens x tokens) block-diagonal mask built from each
  token's segment: what a CPU computes, and the reference the equivalence tests hold varlen's layout to.

``packed_support`` says whether a row can be packed on a device and, where it cannot, why (the trial then trains
padded batches and says so in result.json).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

MAX_FLASH_HEAD = 256


@dataclass
class Segments:
    """Which keys each query of a packed buffer may attend to."""

    backend: str  # "varlen", "flex", "flex64" or "mask"
    cu_q: torch.Tensor  # (segments + 1,) int32
    cu_k: torch.Tensor  # (segments + 1,) int32
    span: int  # the longest segment any batch of the trial can hold (a fixed int: one compiled shape)
    causal: bool
    mask: Optional[torch.Tensor] = None  # mask backend: (1, 1, Cq, Ck) bool, True where attention is allowed
    block_mask: object = None  # flex backend: a flex_attention BlockMask


FLEX_BLOCK = 128  # FlexAttention's default tile: a query block and a key block of 128 tokens
FLEX_TILES = {"flex": FLEX_BLOCK, "flex64": 64}  # a FlexAttention backend's block-mask tile
FLEX_MIN_HEAD = 16  # its GPU kernels take head sizes of 16 and up


def _block_ranges(seg: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, last) segment id of each ``block``-token block of a buffer whose ids never decrease."""
    n = seg.shape[0]
    starts = torch.arange(0, n, block, device=seg.device)
    ends = torch.clamp(starts + block, max=n) - 1
    return seg[starts], seg[ends]


def key_tiles(
    seg_q: torch.Tensor, seg_k: torch.Tensor, causal: bool, block: int = FLEX_BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, count) per ``block``-token query tile: the run of key tiles holding a key of one of its segments
    (causal: none after the query tile), which FlexAttention's kernels visit."""
    q_lo, q_hi = _block_ranges(seg_q, block)
    k_lo, k_hi = _block_ranges(seg_k, block)
    # key blocks that share a segment with query block i: a contiguous run, since ids never decrease
    first = torch.searchsorted(k_hi, q_lo)  # the first key block whose last id reaches the query block's first
    last = torch.searchsorted(k_lo, q_hi, right=True) - 1  # the last key block starting at or before its last id
    if causal:  # self-attention on one buffer: no key block after the query block
        last = torch.minimum(last, torch.arange(q_lo.shape[0], device=seg_q.device))
    return first, torch.clamp(last - first + 1, min=0).to(torch.int32)


def flex_block_mask(seg_q: torch.Tensor, seg_k: torch.Tensor, causal: bool, block: int = FLEX_BLOCK):
    """The BlockMask of attention within segments at ``block``-token tiles, from the ids alone: static shapes, no
    (Cq x Ck) tensor."""
    first, count = key_tiles(seg_q, seg_k, causal, block)
    nk = -(-seg_k.shape[0] // block)
    cols = torch.arange(nk, device=seg_q.device)
    indices = torch.clamp(first[:, None] + cols[None, :], max=nk - 1).to(torch.int32)

    def same_segment(b, h, q, kv):
        keep = seg_q[q] == seg_k[kv]
        return keep & (kv <= q) if causal else keep

    return _FLEX.BlockMask.from_kv_blocks(count[None, None], indices[None, None], BLOCK_SIZE=block,
                                    mask_mod=same_segment, seq_lengths=(seg_q.shape[0], seg_k.shape[0]))  # fmt: skip


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
    block_mask = flex_block_mask(seg_q, seg_k, causal, FLEX_TILES[backend]) if backend in FLEX_TILES else None
    return Segments(backend, cu_q, cu_k, span, causal, mask, block_mask)


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


def _flex_module():
    try:
        import torch.nn.attention.flex_attention as flex
    except ImportError:
        return None
    return flex


_UNREAD = object()
# torch.nn.attention.varlen, or None in a torch without it: read by varlen_available(), not at import (importing it
# loads torch._dynamo, two seconds of every trial's start where no step packs for varlen, as on a CPU)
_VARLEN: object = _UNREAD
_FLEX = _flex_module()  # torch.nn.attention.flex_attention, or None in a torch without it
# how this torch's varlen_attn takes causality, read with the module rather than inside a compiled step:
# ``is_causal`` (torch 2.10-2.11) or ``window_size`` (-1, 0)
CAUSAL_ARG = "window_size"
# whether it takes ``scale`` (torch 2.11 on; 2.10's scales by 1 / sqrt(head size) only, so q is scaled instead)
VARLEN_SCALE = True


def _varlen_kwargs(causal: bool) -> dict:
    if CAUSAL_ARG == "is_causal":
        return {"is_causal": causal}
    return {"window_size": (-1, 0) if causal else (-1, -1)}


def segment_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float) -> torch.Tensor:
    """q (1, h, Cq, d_k), k (1, h, Ck, d_k), v (1, h, Ck, d_v) -> (1, Cq, h * d_v), attention within segments."""
    if seg.backend == "mask":
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=seg.mask, scale=scale)  # (1, h, Cq, d_v)
        return y.transpose(1, 2).flatten(2)
    if seg.backend in FLEX_TILES:
        # contiguous (1, h, C, d) operands: inductor's flex template reads their layout as four dimensions
        q, k, v = (t.contiguous() for t in (q, k, v))
        attn = _FLEX.flex_attention  # type: ignore[union-attr]  # packed_support routes torches without it elsewhere
        y = attn(q, k, v, block_mask=seg.block_mask, scale=scale)  # (1, h, Cq, d_v)
        return y.transpose(1, 2).flatten(2)
    d_v = v.shape[-1]
    size = flash_head_size(q.shape[-1], d_v)
    # (1, h, C, d) -> (C, h, d): the layout the projections wrote, so no copy where no padding is needed
    q, k, v = (_padded_head(t.transpose(1, 2)[0], size) for t in (q, k, v))
    kwargs = _varlen_kwargs(seg.causal)
    if VARLEN_SCALE:
        kwargs["scale"] = scale
    elif not math.isclose(scale * math.sqrt(size), 1.0):  # its own scale is 1 / sqrt(size): q carries the rest
        q = q * (scale * math.sqrt(size))
    attn = _VARLEN.varlen_attn  # type: ignore[union-attr]  # packed_support routes torches without it elsewhere
    y = attn(q, k, v, seg.cu_q, seg.cu_k, seg.span, seg.span, **kwargs)
    return y[None, :, :, :d_v].flatten(2)  # (1, Cq, h * d_v)


def varlen_available() -> bool:
    """Whether this torch has varlen attention; the first call imports it and reads how varlen_attn takes causality
    and scale.  A packed step uses varlen only after this said yes (packed_support, PackedForwardLoss)."""
    global _VARLEN, CAUSAL_ARG, VARLEN_SCALE
    if _VARLEN is _UNREAD:
        varlen = _varlen_module()
        params = inspect.signature(varlen.varlen_attn).parameters if varlen is not None else {}
        CAUSAL_ARG = "is_causal" if "is_causal" in params else "window_size"
        VARLEN_SCALE = "scale" in params
        _VARLEN = varlen
    return _VARLEN is not None


def flex_available() -> bool:
    return _FLEX is not None


def packing_limit(cfg, task: str = "translation") -> Optional[str]:
    """Why a trial of this model and task trains padded batches on any device, or None."""
    if task != "translation":
        return f"the {task} task trains padded batches"
    if cfg.positional == "alibi":
        return "alibi's distance bias is not a segment mask"
    return None


def cuda_model_limit(cfg, backend: str, precision: str = "bf16") -> Optional[str]:
    """Why a model cannot train packed batches on CUDA with ``backend`` (flex, flex64 or varlen) at ``precision``,
    from the model alone (its head sizes, attention dropout), or None where it can (what this torch offers
    aside)."""
    if backend in FLEX_TILES:
        if cfg.attention_dropout > 0:
            return "FlexAttention here has no dropout inside attention (attention_dropout > 0)"
        if max(cfg.d_k, cfg.d_v) > MAX_FLASH_HEAD:
            return f"head size {max(cfg.d_k, cfg.d_v)} is above FlexAttention's {MAX_FLASH_HEAD} here"
        if min(cfg.d_k, cfg.d_v) < FLEX_MIN_HEAD:
            return f"head size {min(cfg.d_k, cfg.d_v)} is below FlexAttention's {FLEX_MIN_HEAD}"
        return None
    if precision != "bf16":
        return f"FlashAttention takes bf16 or fp16, not {precision}"
    if cfg.attention_dropout > 0:
        return "varlen attention has no dropout inside attention (attention_dropout > 0)"
    if flash_head_size(cfg.d_k, cfg.d_v) > MAX_FLASH_HEAD:
        return f"head size {max(cfg.d_k, cfg.d_v)} is above FlashAttention's {MAX_FLASH_HEAD}"
    return None


def packed_support(
    cfg, device: torch.device, task: str = "translation", precision: str = "bf16", attention: str = "auto",
    compile_mode: str = "off",
) -> tuple[Optional[str], str]:  # fmt: skip
    """(backend, why): the attention backend a packed step of this model runs on ``device``, or None and the
    reason it trains padded batches instead.  ``attention`` (the knob packed_attention): auto or varlen, or flex
    or flex64 (CUDA, compiled: FlexAttention's kernels are made by torch.compile)."""
    why = packing_limit(cfg, task)
    if why:
        return None, why
    if device.type != "cuda":
        return "mask", "block-diagonal mask (no varlen kernel off CUDA)"
    if attention in FLEX_TILES:
        if not flex_available():
            return None, f"torch {torch.__version__} has no torch.nn.attention.flex_attention"
        if compile_mode not in ("on", "graphs"):
            return None, f"FlexAttention runs compiled (compile=on or graphs), not compile={compile_mode}"
        why = cuda_model_limit(cfg, "flex", precision)
        if not why and FLEX_TILES[attention] != FLEX_BLOCK:
            from .compiling import flex_tiles_why

            why = flex_tiles_why()
        tiles = f"FlexAttention with a block mask of {FLEX_TILES[attention]}-token blocks"
        return (None, why) if why else (attention, tiles)
    if not varlen_available():
        return None, f"torch {torch.__version__} has no torch.nn.attention.varlen"
    why = cuda_model_limit(cfg, "varlen", precision)
    if why:
        return None, why
    size = flash_head_size(cfg.d_k, cfg.d_v)
    return "varlen", f"varlen FlashAttention at head size {size}"
