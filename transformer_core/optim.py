"""The paper's optimiser (section 5.3) and checkpoint averaging."""

from __future__ import annotations

from typing import Iterable

import torch


def paper_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), steps counted from 1."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def make_adam(params: Iterable[torch.nn.Parameter], betas=(0.9, 0.98), eps: float = 1e-9) -> torch.optim.Adam:
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98, epsilon = 1e-9; the rate is set per step."""
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
