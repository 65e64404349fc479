"""How a training step's forward pass and loss run: eagerly, or through torch.compile.

``compile`` (a run-only knob): ``off`` runs them eagerly (the default); ``on`` compiles them with
torch.compile (inductor); ``auto`` is ``off`` on every device, since the compiled step was measured slower on both
kinds measured: on a CPU slower in fp32 and too little faster in bf16 to repay its compile time within a
cpu-profile trial (benchmarks/README.md, "A faster step"), inductor's kernels that store the boolean masks of ReLU
and dropout for the backward running about 20x slower than eager's (benchmarks/compile_masks.py); on an H200 the
gpu profile's base row trained at 0.08x of eager's rate after an 86 s first step (benchmarks/gpu_step.py,
benchmarks/results/gpu_step_h200.txt).  Inductor builds C++ on a CPU:
where none of the compilers it uses (``torch._inductor.config.cpp.cxx``) is found, ``on`` trains eagerly and
logs one line saying so.

The compiled function computes the eager loss without boolean-mask indexing (a data-dependent shape, which
would split the graph): the real target positions are found outside it and picked with ``index_select``.  It is
compiled with dynamic shapes, so the length-bucketed batches' many (B, S, T) shapes share one graph, and with
inductor's ``fallback_random``, so that dropout draws its masks from torch's generator as eager does.
"""

from __future__ import annotations

import logging
import shutil
from typing import Optional

import torch
import torch.nn.functional as F

from .data import PAD
from .device import autocast
from .loss import smoothed_terms

log = logging.getLogger(__name__)


def inductor_compiler() -> Optional[str]:
    """The path of the first C++ compiler inductor would use on a CPU, or None."""
    import torch._inductor.config as inductor_config

    names = inductor_config.cpp.cxx
    for name in names if isinstance(names, (list, tuple)) else (names,):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def resolve_compile(mode: str, device: torch.device) -> str:
    """``on`` or ``off`` for this device: auto's choice, and eager where inductor has no C++ compiler."""
    if mode == "auto":  # measured slower than eager on a CPU and on a GPU (the module's docstring)
        mode = "off"
    if mode == "on" and device.type == "cpu" and inductor_compiler() is None:
        import torch._inductor.config as inductor_config

        log.warning(
            "compile=on: no C++ compiler for torch.compile on this CPU (looked for %s): training eagerly",
            ", ".join(str(c) for c in inductor_config.cpp.cxx if c) or "none configured",
        )
        return "off"
    return mode


def _selected_loss(model, inputs: list, index, target, eps_ls: float, device_type: str, bf16: bool):
    """Summed smoothed loss and NLL over the flat positions ``index`` of the model's output (compiled)."""
    with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
        hidden = model.features(*inputs)  # (B, T, d_model)
        logits = model.generator(hidden.flatten(0, -2).index_select(0, index))  # (n, V)
    loss, nll = smoothed_terms(F.log_softmax(logits.float(), dim=-1), target, eps_ls)
    return loss.sum(), nll.sum().detach()


class ForwardLoss:
    """``(inputs, tgt_out) -> (smoothed loss sum, NLL sum, target tokens)`` of one micro-batch, eager or
    compiled; ``mode`` is what ran ("on" or "off")."""

    def __init__(self, model, eps_ls: float, device: torch.device, precision: str, mode: str = "off"):
        self.model, self.eps_ls, self.device, self.precision = model, eps_ls, device, precision
        self.mode = resolve_compile(mode, device)
        self._compiled = None
        if self.mode == "on":
            self._compiled = torch.compile(_selected_loss, dynamic=True, options={"fallback_random": True})

    def __call__(self, inputs: list, tgt_out: torch.Tensor):
        if self._compiled is None:
            mask = tgt_out != PAD
            with autocast(self.device, self.precision):
                hidden = self.model.features(*inputs)
                logits = self.model.generator(hidden[mask])  # only real target positions: (n, V)
            loss, nll = smoothed_terms(F.log_softmax(logits.float(), dim=-1), tgt_out[mask], self.eps_ls)
            return loss.sum(), nll.sum().detach(), logits.shape[0]
        index = (tgt_out.flatten() != PAD).nonzero().squeeze(1)
        target = tgt_out.flatten().index_select(0, index)
        bf16 = self.precision == "bf16"
        loss, nll = self._compiled(self.model, inputs, index, target, self.eps_ls, self.device.type, bf16)
        return loss, nll, index.numel()
