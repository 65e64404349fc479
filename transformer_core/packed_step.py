"""The forward pass and loss of a packed batch (data/packing.py): one shape for every step of a trial.

Every tensor the step reads has the trial's one shape, and the loss is a weighted sum over every position of the
target buffer (the tail weighted 0), so nothing in the step depends on the batch's contents: no boolean indexing,
no ``nonzero``, no read of a device number.  That makes it compile once (``compile: on``, inductor at static
shapes) or replay as a CUDA graph (``compile: graphs``, inductor's ``reduce-overhead`` mode, CUDA only), and on
a GPU the host queues the whole step without waiting for the device.

``packing`` (a run-only knob): ``off`` trains padded batches (the default, and what every CPU result was
measured with); ``on`` packs the padded stream's own batches where ``segments.packed_support`` allows, and says
in result.json why not where it does not: the same sentences a step, dropout masks drawn at the buffer's shape;
``fill`` packs buffers filled to the token budget in real tokens from a seeded shuffle (data/packing.py): more
real tokens a step than a padded batch of that budget, and another batch composition; ``blocks`` places a
seeded shuffle's sentences into 128-token blocks, a pair's two sides in the blocks of the same number, so that
FlexAttention's query tiles each visit one key tile (data/packing.py; about as many real tokens a step as
``on``); ``auto`` is ``off`` until packed trials are shown to learn as padded ones do on a GPU.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .compiling import flex_tiles, isa_cache_tag
from .data.packing import PackedBatch, PackedShape
from .device import autocast
from .errors import ConfigError
from .loss import smoothed_terms, smoothed_terms_lse
from .model import PackedSegments
from .segments import FLEX_BLOCK, FLEX_TILES, build_segments, packed_support, varlen_available

PACKING = ("off", "on", "fill", "blocks", "auto")
STREAMS = {
    "off": "padded: length buckets (plan_batches)",
    "on": "packed: the padded stream's batches (plan_batches); dropout masks at the buffer's shape",
    "fill": "packed and filled: a seeded shuffle cut at the token budget in real tokens (plan_packed); dropout masks "
    "at the buffer's shape",
    "blocks": "packed in 128-token blocks: a seeded shuffle placed first-fit into the buffer's blocks (plan_blocks); "
    "dropout masks at the buffer's shape",
}


def resolve_packing(
    mode: str, cfg, device: torch.device, task: str, precision: str = "bf16", attention: str = "auto",
    compile_mode: str = "off",
) -> tuple[Optional[str], str]:  # fmt: skip
    """(attention backend or None, why) for a trial's ``packing`` knob on ``device`` at ``precision``, with its
    ``packed_attention`` and ``compile`` knobs."""
    if mode in ("off", "auto"):  # auto: not yet shown to learn as padded batches do (the module docstring)
        return None, f"packing={mode}"
    return packed_support(cfg, device, task, precision, attention, compile_mode)


def packed_loss(model, tensors: tuple, span: int, backend: str, eps_ls: float, device_type: str, precision: str,
                lse: bool = False):  # fmt: skip
    """Summed smoothed loss and NLL of a packed batch's real target positions (its tail weighted 0)."""
    src, src_pos, tgt_in, tgt_pos, tgt_out, weight, cu_src, cu_tgt, seg_src, seg_tgt = tensors
    segments = PackedSegments(
        encoder=build_segments(backend, cu_src, cu_src, seg_src, seg_src, span, causal=False),
        decoder=build_segments(backend, cu_tgt, cu_tgt, seg_tgt, seg_tgt, span, causal=True),
        cross=build_segments(backend, cu_tgt, cu_src, seg_tgt, seg_src, span, causal=False),
    )
    with autocast(torch.device(device_type), precision):
        hidden = model.packed_features(src, src_pos, tgt_in, tgt_pos, segments)
        logits = model.generator(hidden[0])  # (C, V)
    if lse:  # loss_kernel=lse: from the log-sum-exp, no log-probabilities tensor
        loss, nll = smoothed_terms_lse(logits, tgt_out[0], eps_ls)
    else:
        loss, nll = smoothed_terms(F.log_softmax(logits.float(), dim=-1), tgt_out[0], eps_ls)
    return (loss * weight).sum(), (nll * weight).sum().detach()


class PackedForwardLoss:
    """``prepare(batch)`` puts a packed batch on the device; ``(tensors)`` -> (smoothed loss sum, NLL sum): eager
    (``off``), compiled once at the trial's shape (``on``) or compiled and replayed as a CUDA graph (``graphs``)."""

    def __init__(self, model, eps_ls: float, device: torch.device, precision: str, mode: str, backend: str,
                 shape: PackedShape, accumulate: int = 1, loss_kernel: str = "plain"):  # fmt: skip
        self.model, self.eps_ls, self.device, self.precision = model, eps_ls, device, precision
        self.backend, self.shape = backend, shape
        self.why = ""
        if mode == "auto":
            mode = "off"
        if mode == "graphs" and device.type != "cuda":
            mode, self.why = "on", "CUDA graphs need CUDA: compiled at static shapes"
        if mode == "graphs" and accumulate > 1:
            # a replay writes its gradients over the previous replay's, which a second micro-batch accumulates into
            mode, self.why = "on", f"CUDA graphs take one micro-batch a step (accumulate={accumulate}): compiled"
        self.mode = mode
        # lse: the loss from the log-sum-exp; chunked is the padded eager step's (its rows are gathered first)
        self.loss_kernel = "lse" if loss_kernel == "lse" else "plain"
        self._fn = packed_loss
        if backend == "varlen" and not varlen_available():  # also reads varlen_attn's arguments, before any step
            raise ConfigError(f"torch {torch.__version__} has no torch.nn.attention.varlen")
        if mode in ("on", "graphs"):
            isa_cache_tag()
            tile = FLEX_TILES.get(backend, FLEX_BLOCK)
            flex_tiles(tile if tile != FLEX_BLOCK else None)  # this trial's FlexAttention kernels: at its tiles
        if mode == "on":
            self._fn = torch.compile(packed_loss, dynamic=False)
        elif mode == "graphs":
            self._fn = torch.compile(packed_loss, dynamic=False, mode="reduce-overhead")

    def prepare(self, batch: PackedBatch) -> tuple:
        cuda = self.device.type == "cuda"
        return tuple((t.pin_memory() if cuda else t).to(self.device, non_blocking=True) for t in batch.tensors())

    def __call__(self, tensors: tuple):
        if self.mode == "graphs":
            torch.compiler.cudagraph_mark_step_begin()
        loss, nll = self._fn(self.model, tensors, self.shape.span, self.backend, self.eps_ls, self.device.type,
                             self.precision, self.loss_kernel == "lse")  # fmt: skip
        if self.mode == "graphs":  # a replay overwrites its outputs: keep this micro-batch's sums
            nll = nll.clone()
        return loss, nll
