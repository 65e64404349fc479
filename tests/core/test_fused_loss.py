"""loss_kernel=chunked: the output projection and the label-smoothed loss chunk by chunk equal the plain path."""

import pytest
import torch
import torch.nn.functional as F

from transformer_core.fused_loss import chunk_rows, linear_smoothed_ce
from transformer_core.loss import label_smoothed_nll, picked, smoothed_terms, smoothed_terms_lse


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


@pytest.mark.parametrize("eps", [0.1, 0.0])
def test_the_loss_from_the_log_sum_exp_equals_the_log_softmax_path_with_its_gradients(eps):
    """loss_kernel=lse: lse - x_ref and lse - mean(x) instead of log-probabilities, at logits large enough that
    a naive exp would overflow in fp32."""
    from transformer_core.loss import smoothed_terms_lse

    torch.manual_seed(0)
    n, vocab = 50, 301
    target = torch.randint(1, vocab, (n,))
    results = []
    for terms in (lambda x, t, e: smoothed_terms(F.log_softmax(x.float(), dim=-1), t, e), smoothed_terms_lse):
        torch.manual_seed(1)
        logits = (30 * torch.randn(n, vocab)).requires_grad_()
        loss, nll = terms(logits, target, eps)
        (1.5 * loss.sum()).backward()
        results.append((loss.detach(), nll.detach(), logits.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)
    assert torch.isfinite(results[1][0]).all()


@pytest.mark.parametrize("compile_mode", ["off", "on"])
def test_a_packed_step_with_loss_kernel_lse_gives_the_padded_steps_loss_and_gradients(compile_mode, fixture_corpus):
    """The packed step's loss from the log-sum-exp against the padded step's log-softmax, fp32, eager and compiled
    (inductor on the CPU: what the CUDA graph step compiles), and the padded eager step with lse too."""
    from tests.core.test_packing import SMALL, _batch, _lengths, _loss_and_grads
    from transformer_core.compiling import ForwardLoss
    from transformer_core.config import ModelConfig
    from transformer_core.data.batching import collate
    from transformer_core.data.packing import pack, packed_shape
    from transformer_core.model import build_model
    from transformer_core.packed_step import PackedForwardLoss

    split, cpu = fixture_corpus.split("train"), torch.device("cpu")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**SMALL), fixture_corpus.vocab_size).train()
    index = _batch(split)
    batch = collate(split, index)
    padded = ForwardLoss(model, 0.1, cpu, "fp32")
    inputs, idx, target = padded.prepare((batch.src, batch.tgt_in), batch.tgt_out)
    ref = _loss_and_grads(model, lambda: padded(inputs, idx, target))
    padded_lse = ForwardLoss(model, 0.1, cpu, "fp32", loss_kernel="lse")
    shape = packed_shape(1200, *_lengths(split))
    packed = PackedForwardLoss(model, 0.1, cpu, "fp32", compile_mode, "mask", shape, loss_kernel="lse")
    assert packed.loss_kernel == padded_lse.loss_kernel == "lse"
    tensors = packed.prepare(pack(split, index, shape))
    for got in (_loss_and_grads(model, lambda: packed(tensors)),
                _loss_and_grads(model, lambda: padded_lse(inputs, idx, target))):  # fmt: skip
        torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(got[1], ref[1], rtol=1e-5, atol=1e-4)
        for name in ref[2]:
            torch.testing.assert_close(got[2][name], ref[2][name], rtol=1e-4, atol=1e-5, msg=name)


def _graphs(fn, *args) -> list[str]:
    """The code of the forward and backward graphs torch.compile traces for fn(*args).sum().backward()."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    codes = []

    def grab(gm, _inputs):
        codes.append(gm.code)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    torch.compile(fn, backend=aot_autograd(fw_compiler=grab, bw_compiler=grab), fullgraph=True)(*args).backward()
    torch._dynamo.reset()
    return codes


@pytest.mark.parametrize("kind", ["lse", "log_softmax"])
def test_compiled_the_reference_logit_is_a_masked_sum_with_no_scatter_and_the_same_values(kind):
    """Compiled, the target's logit (log-probability) is read in the row's own reduction: no gather forward and no
    zero-filled (n, V) tensor scattered into backward; loss and gradient equal the eager gather's."""
    torch.manual_seed(3)
    n, vocab = 64, 301
    target = torch.randint(1, vocab, (n,))

    def loss_of(logits):
        if kind == "lse":
            loss, _ = smoothed_terms_lse(logits, target, 0.1)
        else:
            loss, _ = smoothed_terms(F.log_softmax(logits.float(), dim=-1), target, 0.1)
        return loss.sum()

    x = torch.randn(n, vocab, requires_grad=True)
    codes = _graphs(loss_of, x)
    assert len(codes) == 2 and not any("scatter" in c or "gather" in c for c in codes)
    assert any("scatter" in c for c in _graphs(lambda x: x.gather(1, target[:, None]).sum(), x))  # what it avoids
    eager_x, compiled_x = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    eager = loss_of(eager_x)
    eager.backward()
    torch._dynamo.reset()
    compiled = torch.compile(loss_of, dynamic=False)(compiled_x)
    compiled.backward()
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)  # fp32 rounding of another sum order
    torch.testing.assert_close(compiled_x.grad, eager_x.grad, rtol=1e-5, atol=2e-6)
    assert torch.equal(picked(x, target), x.gather(1, target[:, None]).squeeze(1))  # eagerly: the gather
