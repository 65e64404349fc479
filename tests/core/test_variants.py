"""Modern Transformer variants beyond the paper: positional rope | alibi | none, norm_type rmsnorm, activation gelu |
swiglu.  Property tests on tiny CPU models, seeded loops instead of hypothesis (not installed)."""

import math

import pytest
import torch

import transformer_core as tc
from tests.helpers import SMALL_MODEL
from transformer_core.attention import MultiHeadAttention
from transformer_core.config import ffn_inner
from transformer_core.positional import Rotary, alibi_bias, alibi_slopes
from transformer_core.run_config import make_run_config

SMALL = dict(SMALL_MODEL, d_ff=48, max_len=64)
VOCAB = 40
POSITIONAL = ("sinusoidal", "learned", "rope", "alibi", "none")
IN_ATTENTION = ("rope", "alibi", "none")
VARIANTS = [
    {"positional": "rope"},
    {"positional": "alibi"},
    {"positional": "none"},
    {"norm_type": "rmsnorm"},
    {"norm": "pre", "norm_type": "rmsnorm"},
    {"activation": "gelu"},
    {"activation": "swiglu"},
    {"positional": "alibi", "h": 3, "d_k": 6, "norm": "pre", "activation": "swiglu"},  # h not a power of two
]


def _id(kw):
    return ",".join(f"{k}={v}" for k, v in kw.items())


def small_model(seed=0, **kw):
    torch.manual_seed(seed)
    return tc.build_model(tc.model_config("base", **{**SMALL, **kw}), VOCAB).eval()


# causality and padding ---------------------------------------------------------------------------------


@pytest.mark.parametrize("positional", IN_ATTENTION)
def test_changing_a_future_target_token_leaves_earlier_outputs(positional):
    for seed in range(3):
        m = small_model(seed, positional=positional)
        src = torch.randint(3, VOCAB, (2, 9))
        tgt = torch.randint(3, VOCAB, (2, 8))
        t = 2 + seed
        changed = tgt.clone()
        changed[:, t + 1 :] = (tgt[:, t + 1 :] - 3 + 1) % (VOCAB - 3) + 3  # every later token differs
        with torch.no_grad():
            a, b = m(src, tgt), m(src, changed)
        assert torch.allclose(a[:, : t + 1], b[:, : t + 1], atol=1e-5)
        assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :], atol=1e-3)


@pytest.mark.parametrize("positional", IN_ATTENTION)
def test_extra_pad_tokens_leave_outputs_at_real_positions(positional):
    for seed in range(3):
        m = small_model(seed, positional=positional)
        src = torch.randint(3, VOCAB, (2, 6))
        src[1, 4:] = 0  # a shorter sentence in the batch
        tgt = torch.randint(3, VOCAB, (2, 7))
        more_src = torch.cat([src, torch.zeros(2, 3 + seed, dtype=torch.long)], dim=1)
        more_tgt = torch.cat([tgt, torch.zeros(2, 4, dtype=torch.long)], dim=1)
        with torch.no_grad():
            ref = m(src, tgt)
            assert torch.allclose(m(more_src, tgt), ref, atol=1e-5)
            assert torch.allclose(m(src, more_tgt)[:, :7], ref, atol=1e-5)


def test_without_positions_the_encoder_is_permutation_equivariant():
    m = small_model(positional="none")
    src = torch.randint(3, VOCAB, (2, 7))
    perm = torch.randperm(7)
    with torch.no_grad():
        a, _ = m.encode(src)
        b, _ = m.encode(src[:, perm])
    assert torch.allclose(a[:, perm], b, atol=1e-5)
    with torch.no_grad():  # rope and alibi do see the order
        for kind in ("rope", "alibi"):
            m = small_model(positional=kind)
            a, b = m.encode(src)[0], m.encode(src[:, perm])[0]
            assert not torch.allclose(a[:, perm], b, atol=1e-3)


# cached == uncached decoding ----------------------------------------------------------------------------


# beam and greedy output, cached against uncached, for every positional kind: tests/test_model.py


@pytest.mark.parametrize("positional", POSITIONAL)
def test_cached_step_logits_equal_the_full_forward(positional):
    """Teacher-forced: each cached step's log-probabilities equal the full pass at that position."""
    m = small_model(4, positional=positional)
    src = torch.randint(3, VOCAB, (3, 7))
    src[2, 4:] = 0
    tgt = torch.randint(3, VOCAB, (3, 9))
    with torch.no_grad():
        full = torch.log_softmax(m(src, tgt), dim=-1)
        cached, plain = m.start_state(src, True), m.start_state(src, False)
        for t in range(tgt.shape[1]):
            a, b = m.decode_step(tgt[:, t], cached), m.decode_step(tgt[:, t], plain)
            assert torch.allclose(a, full[:, t], atol=1e-5), t
            assert torch.allclose(b, full[:, t], atol=1e-5), t


@pytest.mark.parametrize("positional", ("rope", "alibi", "sinusoidal"))
def test_several_new_tokens_after_a_cache_see_absolute_positions(positional):
    """A chunk of tokens after cached ones (not what beam search does, but the cache must allow it)."""
    m = small_model(5, positional=positional)
    src = torch.randint(3, VOCAB, (2, 6))
    tgt = torch.randint(3, VOCAB, (2, 8))
    with torch.no_grad():
        memory, mask = m.encode(src)
        kv = m.memory_kv(memory)
        full = m.decode_hidden(tgt, kv, mask)
        caches = [{} for _ in m.decoder]
        first = m.decode_hidden(tgt[:, :3], kv, mask, caches, 0)
        rest = m.decode_hidden(tgt[:, 3:], kv, mask, caches, 3)
    assert torch.allclose(torch.cat([first, rest], dim=1), full, atol=1e-5)


# RoPE and ALiBi against their definitions ----------------------------------------------------------------


def test_rope_scores_depend_only_on_the_relative_position():
    g = torch.Generator().manual_seed(0)
    rot = Rotary(256, 16)
    for _ in range(20):
        q, k = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64), torch.randn(1, 1, 1, 16, generator=g)
        q = q.float()
        m, n, shift = (int(x) for x in torch.randint(0, 80, (3,), generator=g))

        def score(i, j):
            return (rot(q, i) * rot(k, j)).sum().item()

        assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-4)
        assert score(m, m) == pytest.approx((q * k).sum().item(), abs=1e-4)  # same position: no rotation left
        assert rot(q, m).norm().item() == pytest.approx(q.norm().item(), rel=1e-5)  # a rotation


def test_rope_rotates_pairs_by_position_times_frequency():
    rot = Rotary(32, 4)  # pairs (0, 2) at theta 1, (1, 3) at theta 10000^(-1/2)
    x = torch.tensor([1.0, 0.0, 0.0, 0.0]).view(1, 1, 1, 4)
    y = rot(x, 5).flatten()
    assert y.tolist() == pytest.approx([math.cos(5.0), 0.0, math.sin(5.0), 0.0], abs=1e-6)


def test_alibi_slopes_are_the_papers():
    assert alibi_slopes(8).tolist() == pytest.approx([2.0 ** -(k + 1) for k in range(8)])
    assert alibi_slopes(4).tolist() == pytest.approx([0.25, 0.0625, 0.015625, 0.00390625])
    # 6 heads: the 4-head slopes, then every other one of the 8-head slopes
    assert alibi_slopes(6).tolist() == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])


def test_alibi_attention_equals_explicit_softmax():
    torch.manual_seed(0)
    att = MultiHeadAttention(16, 2, 4, 4, positional="alibi", max_len=32).eval()
    x = torch.randn(2, 5, 16)
    keep = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    keep[1, ..., 3:] = False
    with torch.no_grad():
        q, k, v = (t.view(2, 5, 2, -1).transpose(1, 2) for t in att.qkv(x).split([8, 8, 8], dim=-1))
        dist = (torch.arange(5)[:, None] - torch.arange(5)[None, :]).abs().float()
        logits = q @ k.transpose(-1, -2) / math.sqrt(4) - att.slopes[:, None, None] * dist  # bias after scaling
        future = torch.ones(5, 5, dtype=torch.bool).triu(1)
        for mask, causal, masked in ((keep, False, logits.masked_fill(~keep, -math.inf)),
                                     (None, True, logits.masked_fill(future, -math.inf))):  # fmt: skip
            expected = att.out((torch.softmax(masked, dim=-1) @ v).transpose(1, 2).reshape(2, 5, 8))
            assert torch.allclose(att(x, mask=mask, is_causal=causal), expected, atol=1e-5), causal


def test_alibi_bias_of_a_cached_step_is_the_last_row_of_the_full_one():
    slopes = alibi_slopes(4)
    full = alibi_bias(slopes, 6, 6, 0, True, torch.float32)
    step = alibi_bias(slopes, 1, 6, 5, True, torch.float32)
    assert torch.equal(step[0, :, 0], full[0, :, 5])
    assert torch.isinf(full[0, :, 0, 1:]).all() and full[0, 0, 5, 0].item() == pytest.approx(-5 * 0.25)


# parameter counts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", VARIANTS, ids=_id)
def test_parameter_count_matches_closed_form(kw):
    cfg = tc.model_config("base", **{**SMALL, **kw})
    assert tc.count_parameters(tc.build_model(cfg, VOCAB)) == tc.closed_form_parameters(cfg, VOCAB)


def test_swiglu_and_rmsnorm_counts_against_hand_formulas():
    d, d_ff, n_enc, n_dec = 32, 48, 2, 2
    base = tc.count_parameters(small_model())
    inner = round(2 / 3 * d_ff)
    assert inner == ffn_inner(d_ff, "swiglu") == 32
    per_ffn = {"relu": 2 * d * d_ff + d_ff + d, "swiglu": 3 * d * inner + 2 * inner + d}
    swiglu = tc.count_parameters(small_model(activation="swiglu"))
    assert swiglu - base == (n_enc + n_dec) * (per_ffn["swiglu"] - per_ffn["relu"])
    norms = 2 * n_enc + 3 * n_dec  # one per sublayer; RMSNorm drops the bias: d fewer each
    assert base - tc.count_parameters(small_model(norm_type="rmsnorm")) == norms * d
    pre = tc.count_parameters(small_model(norm="pre"))
    assert pre - tc.count_parameters(small_model(norm="pre", norm_type="rmsnorm")) == (norms + 2) * d
    assert tc.count_parameters(small_model(activation="gelu")) == base
    for kind in IN_ATTENTION:  # no parameters: rope's tables and alibi's slopes are buffers, not in checkpoints
        m = small_model(positional=kind)
        assert tc.count_parameters(m) == base and set(m.state_dict()) == set(small_model().state_dict())


@pytest.mark.parametrize("d_ff", [3, 2048, 4096, 1000, 1001])
def test_swiglu_inner_width_keeps_the_weights_of_relu(d_ff):
    inner = ffn_inner(d_ff, "swiglu")
    assert inner == round(2 * d_ff / 3)
    assert abs(3 * inner - 2 * d_ff) <= 1  # 3 d_model x inner weights against 2 d_model x d_ff


def test_swiglu_is_silu_gate_times_linear():
    torch.manual_seed(0)
    ff = tc.layers.PositionwiseFeedForward(8, 12, activation="swiglu")
    x = torch.randn(3, 8)
    expected = ff.w2(torch.nn.functional.silu(ff.w1(x)) * ff.w3(x))
    assert ff.w1.out_features == 8 and torch.allclose(ff(x), expected)


def test_rmsnorm_is_torchs_with_the_layernorm_eps():
    m = small_model(norm_type="rmsnorm")
    norm = m.encoder[0].res1.norm
    assert isinstance(norm, torch.nn.RMSNorm) and norm.eps == small_model().encoder[0].res1.norm.eps == 1e-5


# rejected values, one line each -------------------------------------------------------------------------


def test_rejected_values_and_combinations_are_one_line_naming_the_fields():
    cases = [
        ({"positional": "rope", "d_k": "7"}, r"^d_k=7 is invalid: .*positional='rope'"),
        ({"positional": "rotary"}, r"^positional='rotary' is invalid: .*'rope', 'alibi', 'none'"),
        ({"norm_type": "batchnorm"}, r"^norm_type='batchnorm' is invalid: .*'layernorm', 'rmsnorm'"),
        ({"activation": "tanh"}, r"^activation='tanh' is invalid: .*'relu', 'gelu', 'swiglu'"),
        ({"positional": "sinusoidal", "d_model": "33"}, r"^d_model=33 is invalid: .*sinusoidal"),
    ]
    for values, pattern in cases:
        with pytest.raises(tc.ConfigError, match=pattern) as err:
            make_run_config(values)
        assert "\n" not in str(err.value)
    for kind in ("alibi", "none", "learned"):  # only rope needs an even d_k
        make_run_config({"positional": kind, "d_k": "7"})


def test_new_fields_at_their_default_keep_the_content_hash():
    assert make_run_config({}).content_hash() == "441bed8605f7"
    assert make_run_config({"norm_type": "layernorm", "activation": "relu"}).content_hash() == "441bed8605f7"
    assert make_run_config({"beam_stop": "exact"}).content_hash() == "441bed8605f7"  # a recipe field added later
    assert make_run_config({"beam_stop": "length"}).content_hash() != "441bed8605f7"
    hashes = {make_run_config(kw).content_hash() for kw in VARIANTS[:-1]}
    assert len(hashes) == len(VARIANTS) - 1 and "441bed8605f7" not in hashes


# training --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", VARIANTS, ids=_id)
def test_a_training_step_runs_and_lowers_the_loss(kw):
    torch.manual_seed(0)
    m = tc.build_model(tc.model_config("base", **{**SMALL, **kw, "P_drop": 0.1}), VOCAB).train()
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    src = torch.randint(3, VOCAB, (4, 6))
    src[0, 4:] = 0
    tgt = torch.randint(3, VOCAB, (4, 7))
    losses = []
    for _ in range(3):
        loss, _, n = tc.label_smoothed_nll(m(src, tgt[:, :-1]), tgt[:, 1:], 0.1)
        opt.zero_grad()
        (loss / n).backward()
        assert all(p.grad is None or torch.isfinite(p.grad).all() for p in m.parameters())
        opt.step()
        losses.append(loss.item() / n.item())
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]


@pytest.mark.parametrize("positional", ("rope", "alibi"))
def test_bf16_autocast_on_cpu_agrees_with_fp32(positional):
    m = small_model(6, positional=positional)
    src = torch.randint(3, VOCAB, (3, 8))
    src[1, 5:] = 0
    tgt = torch.randint(3, VOCAB, (3, 7))
    with torch.no_grad():
        ref = m(src, tgt)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = m(src, tgt)
    assert low.dtype == torch.bfloat16
    assert (low.float() - ref).abs().max().item() < 0.05 * ref.abs().max().item()
