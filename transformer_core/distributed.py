"""Data parallelism: one trial on several workers (torch.distributed; gloo on CPU, NCCL on GPU).

Each worker takes every world_size-th batch of the same seeded plan and
accumulates accumulate / world_size micro-batches; gradients and token counts
are summed across workers before the step, so W workers with global batch B
follow the same updates as one worker reaching B by accumulation.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def sum_gradients(params: list[torch.nn.Parameter], scalars: list[float]) -> list[float]:
    """Sum every gradient and the given scalars across workers (one flat all-reduce)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat(
        [g.reshape(-1) for g in grads] + [torch.tensor(scalars, dtype=grads[0].dtype, device=grads[0].device)]
    )
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        p.grad = flat[offset : offset + n].view_as(g).clone()
        offset += n
    return flat[offset:].tolist()


def barrier() -> None:
    if world()[1] > 1:
        dist.barrier()
