"""The paper's optimiser (section 5.3), learning-rate schedules as pure functions, and checkpoint averaging."""

from __future__ import annotations

import logging
from typing import Iterable

import torch

from .config import refuse
from .run_config import SCHEDULES


def paper_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), steps counted from 1."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def peak_lr(d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The paper's schedule at its peak (step = warmup): scale * d_model^-0.5 * warmup^-0.5.

    linear and wsd rise to this same peak, so ``lr_scale`` means the same in every schedule."""
    return scale * d_model**-0.5 * warmup**-0.5


def linear_lr(step: int, steps: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Linear warmup to the peak over ``warmup`` steps, then linear decay to 0 at step ``steps``."""
    step = max(step, 1)
    decay = (steps - step) / max(steps - warmup, 1)
    return peak_lr(d_model, warmup, scale) * max(0.0, min(step / warmup, decay))


def wsd_lr(step: int, steps: int, d_model: int, warmup: int, scale: float = 1.0, cooldown: float = 0.2) -> float:
    """Warmup-stable-decay: linear warmup, constant at the peak, then linear decay to 0 at step ``steps``
    over the last ``cooldown`` fraction of the steps."""
    step = max(step, 1)
    decay = (steps - step) / (cooldown * steps)
    return peak_lr(d_model, warmup, scale) * max(0.0, min(step / warmup, 1.0, decay))


def learning_rate(
    step: int, steps: int, d_model: int, warmup: int, scale: float = 1.0, schedule: str = "rsqrt", cooldown: float = 0.2
) -> float:
    """The rate of optimiser step ``step`` (counted from 1) of ``steps`` under ``schedule``."""
    if schedule == "rsqrt":
        return paper_lr(step, d_model, warmup, scale)
    if schedule == "linear":
        return linear_lr(step, steps, d_model, warmup, scale)
    if schedule == "wsd":
        return wsd_lr(step, steps, d_model, warmup, scale, cooldown)
    refuse("schedule", schedule, "one of " + ", ".join(repr(s) for s in SCHEDULES))


def make_adam(
    params: Iterable[torch.nn.Parameter], betas=(0.9, 0.98), eps: float = 1e-9, fused: bool = False
) -> torch.optim.Adam:
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98, epsilon = 1e-9; the rate is set per step.

    ``fused``: torch's fused kernel, one pass over each parameter instead of about ten element-wise ops; its
    updates equal the per-parameter loop's to rounding (not bit for bit).  Where torch has no fused kernel for
    the parameters' device, the loop runs and one line says so."""
    params = list(params)
    if fused:
        try:
            return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, fused=True)
        except RuntimeError as exc:  # e.g. a device torch's fused Adam does not support
            logging.getLogger(__name__).warning("fused_adam: %s; using the per-parameter loop", str(exc).split("\n")[0])
    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps)


def average_state_dicts(states: list[dict]) -> dict:
    """Element-wise mean of model state dicts (the paper averages the last 5 or 20 checkpoints)."""
    if not states:
        raise ValueError("no checkpoints to average")
    out = {}
    for name, first in states[0].items():
        if torch.is_floating_point(first):
            out[name] = sum(s[name].double() for s in states).div(len(states)).to(first.dtype)
        else:
            out[name] = first.clone()
    return out
