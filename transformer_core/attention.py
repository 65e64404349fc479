"""Multi-head attention with independent d_k and d_v (paper section 3.2.2).

Queries and keys are projected to h heads of size d_k, values to h heads of
size d_v, and the concatenated heads (h * d_v) back to d_model.  The product
itself is PyTorch's fused ``scaled_dot_product_attention``.

Self-attention may carry positions (``positional.py``): ``rope`` rotates queries and keys by their absolute
positions before keys are cached; ``alibi`` passes its distance bias, with the causal and padding masks folded
in, to the fused kernel as one additive float ``attn_mask``.  Cross-attention never does.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .positional import Rotary, alibi_bias, alibi_slopes
from .segments import Segments, segment_attention

LOW_PRECISION = (torch.bfloat16, torch.float16)
# CUDA: every kernel but cuDNN's.  cuDNN's attention builds a graph for each new (batch, length) shape, and
# length-bucketed batches bring new shapes all the time: measured (benchmarks/gpu_step.py) about 8 ms of CPU
# per call, which made the gpu profile's step CPU-bound.  Flash (no mask) and memory-efficient (a mask) remain.
_CUDA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def split_heads(x: torch.Tensor, h: int) -> torch.Tensor:
    """(B, T, h * d) -> (B, h, T, d)."""
    B, T, _ = x.shape
    return x.view(B, T, h, -1).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d) -> (B, T, h * d)."""
    B, h, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O.

    ``self_attention=True`` fuses the Q, K and V projections into one matrix
    (rows ordered q, k, v like ``nn.MultiheadAttention.in_proj_weight``);
    cross-attention keeps Q separate so that K and V of the encoder output
    are projected once per source sentence.

    ``positional`` (self-attention only): ``"rope"`` or ``"alibi"`` act here (``max_len`` positions);
    anything else adds nothing.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        dropout: float = 0.0,
        scale: bool = True,
        self_attention: bool = True,
        positional: str = "none",
        max_len: int = 1024,
    ):
        super().__init__()
        self.h, self.d_k, self.d_v = h, d_k, d_v
        self.dropout = dropout
        self.scale = 1.0 / math.sqrt(d_k) if scale else 1.0
        self.self_attention = self_attention
        if self_attention:
            self.qkv = nn.Linear(d_model, h * (2 * d_k + d_v))
        else:
            self.q = nn.Linear(d_model, h * d_k)
            self.kv = nn.Linear(d_model, h * (d_k + d_v))
        self.out = nn.Linear(h * d_v, d_model)
        self.rotary = Rotary(max_len, d_k) if self_attention and positional == "rope" else None
        self.alibi = self_attention and positional == "alibi"
        if self.alibi:
            self.register_buffer("slopes", alibi_slopes(h), persistent=False)

    def _sizes(self) -> list[int]:
        return [self.h * self.d_k, self.h * self.d_k, self.h * self.d_v]

    def project_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the encoder output for cross-attention: (B, h, S, d_k), (B, h, S, d_v)."""
        k, v = self.kv(memory).split(self._sizes()[1:], dim=-1)
        return split_heads(k, self.h), split_heads(v, self.h)

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor], is_causal: bool
    ) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        # Measured (benchmarks/attention_backends.py): on CPU under bf16 autocast a training
        # step with the default (flash) kernel is 2.5x slower than with the math kernel at
        # d_k 16 and 1.14x slower at the paper's d_k 64; in fp32 they tie.
        math_only = q.device.type == "cpu" and q.dtype in LOW_PRECISION
        backends = SDPBackend.MATH if math_only else _CUDA_BACKENDS if q.device.type == "cuda" else None
        with sdpa_kernel(backends) if backends is not None else nullcontext():
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=is_causal, scale=self.scale
            )  # (B, h, T, d_v)
        return self.out(merge_heads(y))

    def forward(
        self,
        x: torch.Tensor,
        mask: Optional[torch.Tensor] = None,
        is_causal: bool = False,
        cache: Optional[dict] = None,
        memory_kv: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
        positions: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """x: (B, T, d_model).  Self-attention unless ``memory_kv`` is given.

        ``mask``: boolean (B, 1, 1 or T, S), True where attention is allowed; or the Segments of a packed
        buffer (B = 1), whose ``positions`` (1, T) rope rotates by.
        ``cache``: dict holding this layer's past keys/values for incremental
        decoding; new keys/values are appended to it.
        """
        if isinstance(mask, Segments):
            return self._packed(x, mask, memory_kv, positions)
        if memory_kv is not None:
            q = split_heads(self.q(x), self.h)
            return self.attend(q, memory_kv[0], memory_kv[1], mask, False)
        q, k, v = (split_heads(t, self.h) for t in self.qkv(x).split(self._sizes(), dim=-1))
        offset = cache["k"].shape[2] if cache is not None and "k" in cache else 0  # absolute position of q[0]
        if self.rotary is not None:  # keys are cached rotated at the positions they were computed at
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        T, S = q.shape[2], k.shape[2]
        if self.alibi:
            bias = alibi_bias(self.slopes, T, S, offset, is_causal, q.dtype)  # (1, h, T, S)
            if mask is not None:
                bias = bias.masked_fill(~mask, float("-inf"))
            return self.attend(q, k, v, bias, False)
        if is_causal and offset:
            # queries after cached keys: one new query attends to every cached position (no mask needed);
            # several need the causal mask aligned at their absolute positions
            is_causal = False
            if T > 1:
                pos = torch.arange(S, device=q.device)
                causal = pos[None, :] <= pos[offset:, None]
                mask = causal if mask is None else mask & causal
        return self.attend(q, k, v, mask, is_causal)

    def _packed(
        self, x: torch.Tensor, seg: Segments, memory_kv: Optional[tuple], positions: Optional[torch.Tensor]
    ) -> torch.Tensor:
        """Attention within the segments of a packed buffer x (1, C, d_model) (segments.py)."""
        if memory_kv is not None:
            q, k, v = split_heads(self.q(x), self.h), memory_kv[0], memory_kv[1]
        else:
            q, k, v = (split_heads(t, self.h) for t in self.qkv(x).split(self._sizes(), dim=-1))
            if self.rotary is not None:
                q, k = self.rotary.at(q, positions), self.rotary.at(k, positions)
        return self.out(segment_attention(q, k, v, seg, self.scale))
