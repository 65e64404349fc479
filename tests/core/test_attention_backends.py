"""Which SDPA kernels attention may use: on CUDA every one but cuDNN's, whose per-shape graph building made the
gpu profile's step CPU-bound (about 8 ms of CPU per call with length-bucketed batches; benchmarks/gpu_step.py)."""

import pytest
import torch
from torch.nn.attention import SDPBackend

from transformer_core.attention import _CUDA_BACKENDS, MultiHeadAttention


def test_cuda_attention_leaves_out_cudnn_and_keeps_a_kernel_for_masks_and_one_without():
    assert SDPBackend.CUDNN_ATTENTION not in _CUDA_BACKENDS
    assert SDPBackend.EFFICIENT_ATTENTION in _CUDA_BACKENDS  # padding masks
    assert SDPBackend.FLASH_ATTENTION in _CUDA_BACKENDS  # causal, no mask
    assert SDPBackend.MATH in _CUDA_BACKENDS  # anything else


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_batches_of_new_shapes_never_reach_cudnn():
    from torch.profiler import ProfilerActivity, profile

    mha = MultiHeadAttention(512, 8, 64, 64, dropout=0.1).cuda()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch, length in ((40, 17), (23, 31), (61, 9)):
            x = torch.randn(batch, length, 512, device="cuda", requires_grad=True)
            mask = torch.ones(batch, 1, 1, length, dtype=torch.bool, device="cuda")
            mask[0, ..., -3:] = False
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = mha(x, mask) + mha(x, is_causal=True)
            y.float().sum().backward()
    names = {e.name for e in prof.events()}
    assert not any("cudnn_attention" in n for n in names), sorted(n for n in names if "attention" in n)
