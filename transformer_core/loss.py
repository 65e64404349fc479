"""Label-smoothed cross entropy (paper section 5.4) that ignores padding."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def label_smoothed_nll(
    logits: torch.Tensor, target: torch.Tensor, eps_ls: float, pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed losses over non-padding targets.

    The smoothed target puts 1 - eps_ls on the reference token and spreads
    eps_ls uniformly over the whole vocabulary:
    loss = (1 - eps_ls) * (-log p_ref) + eps_ls * mean_v(-log p_v).
    Returns (smoothed loss sum, plain NLL sum, number of target tokens).
    logits: (..., V); target: (...).
    """
    logits = logits.reshape(-1, logits.shape[-1]).float()
    target = target.reshape(-1)
    keep = target != pad_id
    logits, target = logits[keep], target[keep]
    loss, nll = smoothed_terms(F.log_softmax(logits, dim=-1), target, eps_ls)
    return loss.sum(), nll.sum().detach(), keep.sum()


def picked(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """x[i, target[i]] of x (n, V): a gather eagerly; while compiling, the row's sum of x where the column is the
    target (the same value: every other term adds 0), which the compiler reads in the same pass as the row's other
    reductions, and whose gradient is a mask in that pass rather than a zero-filled (n, V) tensor that the gather's
    backward scatters into and the next kernel reads again."""
    if torch.compiler.is_compiling():
        hit = torch.arange(x.shape[-1], device=x.device) == target[:, None]
        return torch.where(hit, x, 0.0).sum(dim=-1)
    return x.gather(1, target[:, None]).squeeze(1)


def smoothed_terms(logp: torch.Tensor, target: torch.Tensor, eps_ls: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token smoothed loss and plain NLL from log-probabilities logp (n, V) and targets (n,)."""
    nll = -picked(logp, target)
    if eps_ls > 0:
        # the mean over the vocabulary as a sum then a division of the (n,) sums: what mean() computes, but its
        # gradient is a broadcast of n values instead of a division of all n x V
        smooth = -logp.sum(dim=-1) / logp.shape[-1]
        return (1.0 - eps_ls) * nll + eps_ls * smooth, nll
    return nll, nll


def smoothed_terms_lse(logits: torch.Tensor, target: torch.Tensor, eps_ls: float) -> tuple[torch.Tensor, torch.Tensor]:
    """smoothed_terms of log_softmax(logits), written from each row's log-sum-exp: nll = lse - x_ref and the
    smoothing term lse - mean(x), so no (n, V) tensor of log-probabilities exists.  Equal to rounding; a compiler
    can read the logits once forward (log-sum-exp, sum and the reference together) and once backward
    (loss_kernel=lse)."""
    x = logits.float()
    lse = torch.logsumexp(x, dim=-1)
    nll = lse - picked(x, target)
    if eps_ls > 0:
        smooth = lse - x.sum(dim=-1) / x.shape[-1]
        return (1.0 - eps_ls) * nll + eps_ls * smooth, nll
    return nll, nll
