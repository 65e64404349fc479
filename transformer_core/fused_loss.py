"""The output projection and the label-smoothed cross entropy in one pass over row chunks, never holding the
(target tokens x vocabulary) logits of the whole batch (``loss_kernel=chunked``).

The plain step (``loss_kernel=plain``, the default) computes the generator's logits for every real target
position at once, casts them to fp32 and takes log_softmax: at the gpu profile's 25,000 target tokens and a
37,000-piece vocabulary that is 3.7 GB of fp32 logits, their log-probabilities and their gradient, and on an H100 the
log-softmax forward and backward took 13% of the step's kernel time.  Here each chunk of rows computes its logits,
the loss terms and at once their gradient with respect to the logits (softmax minus the smoothed target), which it
turns into the chunk's gradient of the hidden states and adds to the weight's gradient; only those two gradients
are kept for backward, so memory holds one chunk's logits at a time.  This is the method of liger-kernel's fused
linear cross-entropy, written in PyTorch so that it runs on any device; its loss and gradients equal the plain
path's to rounding (tests/core/test_fused_loss.py, fp32 to 1e-5 with padding and label smoothing).

The matrix products run in the hidden states' dtype (bf16 under autocast, as the plain path's linear layer does),
the logits and the loss terms in fp32.  The weight's gradient is summed over chunks in fp32.
"""

from __future__ import annotations

import torch

CHUNK_BYTES = 256 * 2**20  # fp32 logits of one chunk


def chunk_rows(vocab: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Rows per chunk so that a chunk's fp32 logits take about ``chunk_bytes``."""
    return max(1, chunk_bytes // (4 * max(vocab, 1)))


class _LinearSmoothedCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, eps_ls: float, rows: int):
        n, vocab = hidden.shape[0], weight.shape[0]
        dtype = hidden.dtype
        w = weight.to(dtype)
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        loss = hidden.new_zeros((), dtype=torch.float32)
        nll = hidden.new_zeros((), dtype=torch.float32)
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, n, rows):
                h, t = hidden[start : start + rows], target[start : start + rows]
                z = (h @ w.t()).float()  # (rows, V) logits
                lse = torch.logsumexp(z, dim=-1)
                token_nll = lse - z.gather(1, t[:, None]).squeeze(1)
                nll += token_nll.sum()
                if eps_ls > 0:  # -mean_v log p_v = lse - mean_v z_v
                    loss += ((1.0 - eps_ls) * token_nll + eps_ls * (lse - z.mean(dim=-1))).sum()
                else:
                    loss += token_nll.sum()
                g = z.sub_(lse[:, None]).exp_()  # softmax, in the logits' memory
                g.scatter_add_(1, t[:, None], torch.full_like(g[:, :1], -(1.0 - eps_ls)))
                if eps_ls > 0:
                    g.sub_(eps_ls / vocab)
                g = g.to(dtype)
                grad_hidden[start : start + rows] = g @ w
                grad_weight.add_((g.t() @ h).float())
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.weight_dtype = weight.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        grad_hidden, grad_weight = ctx.saved_tensors
        scale = grad_loss.to(torch.float32)
        gh = grad_hidden * scale.to(grad_hidden.dtype) if ctx.needs_input_grad[0] else None
        gw = (grad_weight * scale).to(ctx.weight_dtype) if ctx.needs_input_grad[1] else None
        return gh, gw, None, None, None


def linear_smoothed_ce(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, eps_ls: float, rows: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed label-smoothed loss, summed NLL) of ``hidden`` (n, d) projected by ``weight`` (V, d) onto targets
    (n,): what ``loss.smoothed_terms(log_softmax(hidden @ weight.T))`` sums, chunk by chunk.  The NLL carries no
    gradient."""
    rows = rows or chunk_rows(weight.shape[0])
    loss, nll = _LinearSmoothedCE.apply(hidden, weight, target, float(eps_ls), int(rows))
    return loss, nll.detach()
