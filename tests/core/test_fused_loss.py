"""loss_kernel=chunked: the output projection and the label-smoothed loss chunk by chunk equal the plain path."""

import pytest
import torch
import torch.nn.functional as F

from transformer_core.fused_loss import chunk_rows, linear_smoothed_ce
from transformer_core.loss import label_smoothed_nll, smoothed_terms


def _plain(hidden, weight, target, eps):
    loss, nll = smoothed_terms(F.log_softmax((hidden @ weight.t()).float(), dim=-1), target, eps)
    return loss.sum(), nll.sum().detach()


@pytest.mark.parametrize("eps", [0.1, 0.0])
@pytest.mark.parametrize("rows", [7, 64, 1000])  # several chunks with a ragged last one; one chunk
def test_chunked_loss_and_gradients_equal_the_plain_path_in_fp32(eps, rows):
    torch.manual_seed(0)
    n, d, vocab = 90, 24, 301
    target = torch.randint(1, vocab, (n,))
    grads = []
    for fn in (_plain, lambda h, w, t, e: linear_smoothed_ce(h, w, t, e, rows=rows)):
        torch.manual_seed(1)
        hidden = torch.randn(n, d, requires_grad=True)
        weight = (0.3 * torch.randn(vocab, d)).requires_grad_()
        loss, nll = fn(hidden, weight, target, eps)
        (2.5 * loss).backward()  # a scaled loss: the saved gradients are scaled in backward
        grads.append((loss.detach(), nll, hidden.grad, weight.grad))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_chunked_loss_over_padded_batches_equals_label_smoothed_nll():
    torch.manual_seed(0)
    B, T, d, vocab = 3, 11, 16, 57
    hidden = torch.randn(B, T, d)
    weight = torch.randn(vocab, d)
    target = torch.randint(1, vocab, (B, T))
    target[0, 7:] = 0  # padding
    target[2, 3:] = 0
    ref_loss, ref_nll, ntok = label_smoothed_nll(hidden @ weight.t(), target, 0.1)
    flat = target.flatten()
    index = (flat != 0).nonzero().squeeze(1)
    loss, nll = linear_smoothed_ce(hidden.flatten(0, 1).index_select(0, index), weight, flat[index], 0.1, rows=5)
    assert ntok == index.numel()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-5)


def test_chunked_loss_under_bf16_autocast_stays_within_bf16_rounding_of_the_plain_path():
    torch.manual_seed(0)
    n, d, vocab = 64, 32, 200
    hidden, weight, target = torch.randn(n, d), 0.2 * torch.randn(vocab, d), torch.randint(1, vocab, (n,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = torch.nn.functional.linear(hidden, torch.eye(d))  # bf16 hidden states, as the model's under autocast
        chunked, _ = linear_smoothed_ce(h, weight, target, 0.1, rows=16)
        plain, _ = _plain(h.float(), weight.bfloat16().float(), target, 0.1)
    assert abs(chunked.item() - plain.item()) < 2e-3 * abs(plain.item())


def test_a_chunk_holds_about_a_quarter_gigabyte_of_logits():
    assert chunk_rows(37000) == 1813 and chunk_rows(10) > 1e6 and chunk_rows(0) > 0


def test_the_knob_trains_the_same_steps_keeps_the_trial_id_and_is_recorded(tmp_path, fixture_data_dir):
    from transformer_core.run_config import make_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer

    from .test_compile import TINY

    runs, grads = {}, {}
    for kernel in ("plain", "chunked"):
        values = {**TINY, "data_dir": str(fixture_data_dir), "precision": "fp32", "loss_kernel": kernel}
        tr = Trainer(make_run_config(values), tmp_path / kernel, JsonTracker(tmp_path / f"{kernel}.jsonl"), None)
        assert tr.forward_loss.loss_kernel == kernel
        batch = next(tr.stream)
        loss, _ = tr.forward_loss(*tr.forward_loss.prepare(tr.task.inputs(batch), batch.tgt_out))
        loss.backward()  # the first micro-batch's gradients, before Adam (which magnifies rounding in tiny ones)
        grads[kernel] = [p.grad.clone() for p in tr.model.parameters()]
        runs[kernel] = [tr.train_step()[:2] for _ in range(3)]  # (loss, NLL) of the next optimiser steps
    for (la, na), (lb, nb) in zip(runs["plain"], runs["chunked"]):
        assert abs(la - lb) < 1e-4 * abs(la) and abs(na - nb) < 1e-4 * abs(na)
    for a, b in zip(grads["plain"], grads["chunked"]):  # every parameter, the tied embedding included
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    default = make_run_config(TINY)
    assert default.train.loss_kernel == "plain"
    assert make_run_config({**TINY, "loss_kernel": "chunked"}).content_hash() == default.content_hash()
