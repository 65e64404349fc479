"""The residual_dtype knob (layers.set_residual_dtype): a bf16 residual stream under bf16 autocast, fp32 otherwise."""

import dataclasses

import pytest
import torch

from transformer_core.config import ModelConfig
from transformer_core.errors import ConfigError
from transformer_core.layers import Residual, set_residual_dtype
from transformer_core.loss import label_smoothed_nll
from transformer_core.model import build_model
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.trainer import Trainer

from .test_compile import TINY

CFG = ModelConfig(N=2, d_model=32, d_ff=64, h=2, d_k=16, d_v=16, P_drop=0.0)


def _batch(vocab: int = 50):
    g = torch.Generator().manual_seed(4)
    src = torch.randint(4, vocab, (6, 9), generator=g)
    tgt = torch.randint(4, vocab, (6, 8), generator=g)
    return src, tgt[:, :-1], tgt[:, 1:]


def _step(stream: str, norm: str = "post", autocast: bool = True):
    """(loss, the block outputs' dtypes, the dtypes of the gradients reaching them, the parameters' gradients)."""
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(CFG, norm=norm), 50)
    assert set_residual_dtype(model, stream) == 2 * 2 + 3 * 2  # every block: 2 an encoder layer, 3 a decoder layer
    outs, grads = [], []

    def seen(_m, _inp, out):
        outs.append(out.dtype)
        out.register_hook(lambda g: grads.append(g.dtype))

    for m in model.modules():
        if isinstance(m, Residual):
            m.register_forward_hook(seen)
    src, tgt_in, tgt_out = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(src, tgt_in)
        loss, _, _ = label_smoothed_nll(logits, tgt_out, 0.1, 0)
    loss.backward()
    return loss.item(), set(outs), set(grads), [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_bf16_stream_is_bf16_both_ways_and_trains_to_rounding(norm):
    ref, ref_outs, ref_grads, ref_g = _step("fp32", norm)
    loss, outs, grads, g = _step("bf16", norm)
    assert outs == {torch.bfloat16} and grads == {torch.bfloat16}  # the stream and its gradient, every block
    if norm == "post":
        assert ref_outs == {torch.float32}  # autocast's own: a norm's output is fp32 (what the knob changes)
    assert loss != ref  # the knob does something
    # bf16 keeps 8 bits: a rounding of the stream once a sublayer moves a loss near log(50) = 3.9 by far less
    # than 1%; a stream cast to a coarser type, or a wrong block, moves it further
    assert abs(loss - ref) < 0.01 * abs(ref)
    cos = [torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item() for a, b in zip(g, ref_g)]
    assert min(cos) > 0.97  # every parameter's gradient points the same way


def test_the_knobs_values_are_the_streams_the_layers_keep():
    from transformer_core.layers import RESIDUAL_DTYPES
    from transformer_core.run_config import RESIDUAL_DTYPE

    assert tuple(RESIDUAL_DTYPES) == RESIDUAL_DTYPE and RESIDUAL_DTYPES["fp32"] is None


def test_outside_autocast_the_stream_stays_fp32():
    loss, outs, grads, _ = _step("bf16", autocast=False)  # an fp32 forward (a CPU decode, an export) still runs
    assert outs == {torch.float32} and grads == {torch.float32}
    ref, *_ = _step("fp32", autocast=False)
    assert loss == ref  # without autocast the knob changes nothing


def test_a_run_trains_records_and_decodes_with_its_stream_and_refuses_it_without_bf16(tmp_path, fixture_data_dir):
    from tests.helpers import tiny_run_config
    from transformer_core.inference import load_trained
    from transformer_core.train import train_and_evaluate

    cfg = tiny_run_config(fixture_data_dir, steps=4, eval_every=4, eval_bleu="final", precision="bf16",
                          residual_dtype="bf16")  # fmt: skip
    result = train_and_evaluate(cfg, tmp_path / "run")
    assert result["status"] == "finished" and result["residual_dtype"] == "bf16" and result["precision"] == "bf16"
    tm = load_trained(tmp_path / "run", data_dir=fixture_data_dir)  # tsweep translate/evaluate decode as it did
    blocks = [m for m in tm.model.modules() if isinstance(m, Residual)]
    assert blocks and all(m.stream is torch.bfloat16 for m in blocks) and tm.precision == "bf16"
    assert make_run_config({**TINY, "residual_dtype": "bf16"}).content_hash() == make_run_config(TINY).content_hash()
    with pytest.raises(ConfigError, match=r"residual_dtype='bf16' is invalid with precision fp32.*allowed 'fp32'"):
        Trainer(make_run_config({**TINY, "data_dir": str(fixture_data_dir), "residual_dtype": "bf16"}), tmp_path / "x",
                JsonTracker(tmp_path / "x.jsonl"), None)  # fmt: skip
    with pytest.raises(ConfigError, match="residual_dtype"):
        make_run_config({**TINY, "residual_dtype": "fp16"})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_flex_step_with_a_bf16_stream_equals_the_fp32_stream_to_rounding(fixture_corpus):
    """The packed FlexAttention step compiled (inductor's Triton kernels fuse the casts) with the stream in bf16
    against the same step with autocast's fp32 stream: the loss and every gradient to bf16's rounding."""
    from tests.core.test_packing import SMALL, _loss_and_grads
    from transformer_core.data.packing import PackedStream, pack_tiles
    from transformer_core.packed_step import PackedForwardLoss

    split = fixture_corpus.split("train")
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**SMALL, "d_model": 64, "d_k": 16, "d_v": 16}), fixture_corpus.vocab_size)
    model = model.to(device).train()
    stream = PackedStream(split, 600, seed=5, max_len=64, layout="tiles")
    pb = pack_tiles(split, stream._plan[0], stream.shape)
    runs = {}
    for name in ("fp32", "bf16"):
        set_residual_dtype(model, name)
        torch._dynamo.reset()
        step = PackedForwardLoss(model, 0.1, device, "bf16", "on", "flex", stream.shape)
        runs[name] = _loss_and_grads(model, lambda: step(step.prepare(pb)))
    ref, got = runs["fp32"], runs["bf16"]
    assert not torch.equal(got[0], ref[0])  # the compiled step casts the stream (the knob is not lost in tracing)
    torch.testing.assert_close(got[0], ref[0], rtol=2e-2, atol=1e-2)
    for name in ref[2]:
        diff = (got[2][name] - ref[2][name]).norm() / ref[2][name].norm().clamp_min(1e-12)
        assert diff < 0.05, (name, float(diff))
