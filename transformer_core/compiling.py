"""How a training step's forward pass and loss run: eagerly, or through torch.compile.

``compile`` (a run-only knob): ``off`` runs them eagerly (the default); ``on`` compiles them with
torch.compile (inductor); ``auto`` is ``off`` on every device.  On a CPU the compiled step was measured slower in
fp32 and too little faster in bf16 to repay its compile time within a cpu-profile trial (benchmarks/README.md, "A
faster step"), inductor's kernels that store the boolean masks of ReLU and dropout for the backward running about
20x slower than eager's (benchmarks/compile_masks.py).  On an H200 the gpu profile's base row trains 1.2-1.6x
faster compiled once it has compiled (about 2.5-3 minutes: a 119 s first step and one later recompile of about
40 s; benchmarks/gpu_step.py,
benchmarks/results/gpu_step_h200.txt), but there the compiled step pads lengths (below), so its dropout masks are
other draws than eager's, and no GPU trial has shown it learns within seed noise of eager: ``on`` is asked for,
not assumed.  Inductor builds C++ on a CPU:
where none of the compilers it uses (``torch._inductor.config.cpp.cxx``) is found, ``on`` trains eagerly and
logs one line saying so.

Both ways pick the logits of real target positions with ``index_select`` at flat positions found on the host
(``ForwardLoss.prepare``), before the batch goes to the device: no boolean-mask indexing, whose data-dependent
shape would split the compiled graph and, on a GPU, make the host wait for the device in the middle of every
forward pass.  The compiled function is compiled with dynamic shapes and without duck sizing, so that the
length-bucketed batches' many (B, S, T) shapes share one graph (with duck sizing, a first batch whose source and
target lengths were equal tied them, and the next batch recompiled), and with inductor's ``fallback_random``, so
that dropout draws its masks from torch's generator as eager does.  On a GPU it also pads the lengths to a
multiple of 8, never past the model's ``max_len`` (right-padding, which the padding and causal masks keep out of
every real position): inductor guards its kernels on whether a length is a multiple of 8, and each combination
compiled anew, about a minute each on an H200.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
from typing import Optional

import torch
import torch.nn.functional as F

from .data import PAD
from .device import autocast
from .fused_loss import linear_smoothed_ce
from .loss import smoothed_terms, smoothed_terms_lse

log = logging.getLogger(__name__)


def inductor_compiler() -> Optional[str]:
    """The path of the first C++ compiler inductor would use on a CPU, or None."""
    import torch._inductor.config as inductor_config

    names = inductor_config.cpp.cxx
    for name in names if isinstance(names, (list, tuple)) else (names,):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def isa_cache_tag() -> str:
    """Add the instruction set inductor compiles this process's CPU kernels for (e.g. ``avx2`` where
    ATEN_CPU_CAPABILITY imitates another CPU) to torch.compile's cache-key tag, before anything compiles; returns
    the tag.  torch 2.13's on-disk cache keys carry no instruction set on a CPU: a process imitating AVX2 that shared
    the cache directory with one compiling for this machine's own set was handed the other's kernels, whose results
    were wrong by thousands (benchmarks/results/loss_reference_cpu.txt), and the same holds the other way round."""
    import torch.compiler.config as compiler_config
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    try:
        found = str(pick_vec_isa())
    except Exception:  # no C++ compiler to check the sets with (a CUDA-only host): ATen's own choice
        found = torch.backends.cpu.get_cpu_capability()
    isa = "isa-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", found or "none")
    tags = [t for t in str(compiler_config.cache_key_tag or "").split(",") if t]
    if isa not in tags:
        compiler_config.cache_key_tag = ",".join([*tags, isa])
    return compiler_config.cache_key_tag


# the inductor choices that say which tiles FlexAttention's forward and backward kernels are compiled at
_FLEX_HOOKS = ("get_flex_attention_fwd_configs", "get_flex_attention_bwd_configs")
_FLEX_TILE: list[Optional[int]] = [None]  # the tile this process's FlexAttention kernels divide; None: inductor's


def flex_tiles_why() -> Optional[str]:
    """Why this torch cannot compile FlexAttention at block-mask tiles smaller than its own, or None."""
    try:
        from torch._inductor.choices import InductorChoices
    except ImportError:
        return f"torch {torch.__version__} has no inductor choices to set FlexAttention's kernel tiles with"
    if not all(hasattr(InductorChoices, name) for name in _FLEX_HOOKS):
        return f"torch {torch.__version__}'s inductor gives no way to set FlexAttention's kernel tiles"
    return None


def fit_tiles(configs: list, tile: int) -> list:
    """FlexAttention kernel configurations (inductor's FlexConfig or FlexBwDConfig) whose tiles divide ``tile``:
    a tile that does not is set to ``tile``, and the warps of a changed configuration to at most 4 (what inductor
    itself runs on Hopper at 64-token backward tiles).  Inductor skips a backward configuration whose tiles do not
    divide the block mask's, and Hopper's default for head sizes of 64-128 is (64, 128, 128, 64): without this, a
    mask of 64-token blocks compiles to no backward kernel at all."""
    out = []
    for conf in configs:
        names = [f.name for f in dataclasses.fields(conf)]
        changes = {n: tile for n in names if n.startswith("block_") and tile % getattr(conf, n)}
        if changes and "num_warps" in names:
            changes["num_warps"] = min(conf.num_warps, 4)
        fitted = dataclasses.replace(conf, **changes)
        if fitted not in out:
            out.append(fitted)
    return out


def flex_tiles(tile: Optional[int]) -> None:
    """Compile this process's FlexAttention kernels from now on at tiles dividing ``tile`` (a block mask of
    ``tile``-token blocks), or at inductor's own (None).  The choice is process-wide, as a trial's step is: the
    backward is compiled on its first call, on autograd's thread, so a thread-local setting would miss it."""
    if tile is not None and (tile < 16 or tile & (tile - 1)):
        raise ValueError(f"FlexAttention tile {tile} is invalid: allowed a power of two of 16 or more")
    _FLEX_TILE[0] = tile
    if tile is None or flex_tiles_why():
        return
    from torch._inductor.choices import InductorChoices

    for name in _FLEX_HOOKS:
        original = getattr(InductorChoices, name)
        if getattr(original, "fits_tiles", False):
            continue

        def fitted(self, *args, _original=original, **kwargs):
            configs = _original(self, *args, **kwargs)
            return configs if _FLEX_TILE[0] is None else fit_tiles(configs, _FLEX_TILE[0])

        fitted.fits_tiles = True  # type: ignore[attr-defined]
        setattr(InductorChoices, name, fitted)


def resolve_compile(mode: str, device: torch.device) -> str:
    """``on`` or ``off`` for this device: auto's choice, and eager where inductor has no C++ compiler."""
    if mode == "auto":  # slower than eager on a CPU; on a GPU not shown to learn as eager does (the docstring)
        mode = "off"
    if mode == "graphs":  # padded batches change shape from step to step: no one graph to capture
        mode = "on"
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
    """``prepare(inputs, tgt_out)`` puts a micro-batch on the device; ``(inputs, index, target)`` -> (smoothed loss
    sum, NLL sum) of it, eager or compiled; ``mode`` is what ran ("on" or "off")."""

    def __init__(self, model, eps_ls: float, device: torch.device, precision: str, mode: str = "off",
                 loss_kernel: str = "plain"):  # fmt: skip
        self.model, self.eps_ls, self.device, self.precision = model, eps_ls, device, precision
        self.mode = resolve_compile(mode, device)
        self._compiled = None
        self.pad_to = 1  # lengths padded to a multiple of this before the compiled function (GPU only)
        if self.mode == "on":
            isa_cache_tag()
            self._compiled = torch.compile(_selected_loss, dynamic=True, options={"fallback_random": True})
            self.pad_to = 8 if device.type == "cuda" else 1
        self.max_len = model.cfg.max_len  # padding never makes a batch longer than the positions the model has
        # the chunked projection and loss (fused_loss.py) in the eager step; a compiled step fuses its own
        self.loss_kernel = loss_kernel if self.mode == "off" else "plain"

    def prepare(self, inputs: tuple, tgt_out: torch.Tensor) -> tuple[list, torch.Tensor, torch.Tensor]:
        """Host tensors of one micro-batch -> (device inputs, flat indices of its real target positions, their
        targets), the indices found on the host so that the device never has to report how many there are."""
        if self.pad_to > 1:
            pad = [_pad_length(x, self.pad_to, self.max_len) for x in (*inputs, tgt_out)]
            inputs, tgt_out = pad[:-1], pad[-1]
        flat = tgt_out.flatten()
        index = (flat != PAD).nonzero().squeeze(1)
        moved = [x.to(self.device, non_blocking=True) for x in (*inputs, index, flat.index_select(0, index))]
        return moved[:-2], moved[-2], moved[-1]

    def __call__(self, inputs: list, index: torch.Tensor, target: torch.Tensor):
        if self._compiled is None and self.loss_kernel == "chunked":
            with autocast(self.device, self.precision):
                hidden = self.model.features(*inputs).flatten(0, -2).index_select(0, index)  # (n, d_model)
            return linear_smoothed_ce(hidden, self.model.generator.weight, target, self.eps_ls)
        if self._compiled is None:
            with autocast(self.device, self.precision):
                hidden = self.model.features(*inputs)
                logits = self.model.generator(hidden.flatten(0, -2).index_select(0, index))  # (n, V)
            if self.loss_kernel == "lse":
                loss, nll = smoothed_terms_lse(logits, target, self.eps_ls)
            else:
                loss, nll = smoothed_terms(F.log_softmax(logits.float(), dim=-1), target, self.eps_ls)
            return loss.sum(), nll.sum().detach()
        bf16 = self.precision == "bf16"
        # torch's switch for duck sizing is private (torch.fx.experimental._config): a torch without it fails here
        with torch.fx.experimental._config.patch(use_duck_shape=False):
            return self._compiled(self.model, inputs, index, target, self.eps_ls, self.device.type, bf16)


def _pad_length(x: torch.Tensor, multiple: int, limit: int) -> torch.Tensor:
    """(B, L) token ids right-padded with PAD to the next multiple of ``multiple``, but not past ``limit``."""
    extra = max(0, min(-x.shape[1] % multiple, limit - x.shape[1]))
    return F.pad(x, (0, extra), value=PAD) if extra else x
