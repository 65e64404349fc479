"""task=lm: the decoder-only language model, its bits per byte, its data side, specs, sweeps and reports."""

import dataclasses
import math

import pytest
import torch

from tests.helpers import SMALL_MODEL
from transformer_core.config import model_config
from transformer_core.data.monolingual import load_lm_corpus
from transformer_core.data.prepare import BOS, EOS
from transformer_core.lm import DecoderOnlyLM, build_lm, score, text_bytes
from transformer_core.model import count_parameters
from transformer_core.params import closed_form_lm_parameters


@pytest.fixture(scope="module")
def lm_corpus(fixture_data_dir):
    return load_lm_corpus("bible-en-de", 400, fixture_data_dir, "en")


def _hand_nll(model: DecoderOnlyLM, pieces_per_line, window: int) -> tuple[float, int]:
    """Each line alone: BOS + pieces -> pieces + EOS, cut into windows, NLL summed token by token."""
    total, count = 0.0, 0
    with torch.no_grad():
        for pieces in pieces_per_line:
            inp, out = [BOS, *map(int, pieces)], [*map(int, pieces), EOS]
            for i in range(0, len(out), window):
                logp = torch.log_softmax(model(torch.tensor([inp[i : i + window]]))[0].double(), dim=-1)
                for t, target in enumerate(out[i : i + window]):
                    total -= float(logp[t, target])
                    count += 1
    return total, count


def test_bits_per_byte_against_a_hand_computation(lm_corpus):
    """bpb = summed NLL (nats, EOS included) / (ln 2 x UTF-8 bytes of the text file, a newline per line)."""
    assert text_bytes(["In the beginning", "Grüße"]) == (16 + 1) + (7 + 1)  # ü and ß are two bytes each
    dev = lm_corpus.split("dev")
    dev_file = lm_corpus.directory / "dev.text"
    assert text_bytes(dev.tgt_text) == dev_file.stat().st_size
    # identity normalisation: the pieces spell each line exactly, so the NLL is the text's
    processor = lm_corpus.processor()
    assert [processor.decode(list(map(int, p))) for p in dev.tgt] == dev_file.read_text(encoding="utf-8").splitlines()
    torch.manual_seed(0)
    for max_len in (1024, 8):  # 8: every line is scored in windows of 8 predictions
        model = build_lm(model_config("base", **SMALL_MODEL, max_len=max_len), lm_corpus.vocab_size)
        model.eval()
        s = score(model, dev, "cpu", "fp32", budget=300)  # several padded batches
        nll, tokens = _hand_nll(model, dev.tgt, max_len)
        assert s.tokens == tokens == sum(len(p) + 1 for p in dev.tgt)
        assert s.nll == pytest.approx(nll, rel=1e-5)
        assert s.bpb == pytest.approx(nll / (math.log(2) * dev_file.stat().st_size), rel=1e-5)
        assert s.ppl == pytest.approx(math.exp(nll / tokens), rel=1e-5)
    # a uniform model (zero embeddings, tied: zero logits): log2(V) bits per piece
    with torch.no_grad():
        model.embed.weight.zero_()
    s = score(model, dev, "cpu", "fp32")
    assert s.bpb == pytest.approx(s.tokens * math.log2(lm_corpus.vocab_size) / s.bytes, rel=1e-6)  # fp32


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "alibi", "none"])
def test_lm_is_causal_and_ties_its_embeddings(positional):
    torch.manual_seed(0)
    cfg = model_config("base", **SMALL_MODEL, positional=positional, norm="pre", activation="swiglu")
    model = build_lm(cfg, 50)
    model.eval()
    x = torch.randint(4, 50, (2, 12))
    y = x.clone()
    y[:, 7] = (y[:, 7] + 1 - 4) % 46 + 4  # another token at position 7 only
    a, b = model(x), model(y)
    assert torch.equal(a[:, :7], b[:, :7])  # earlier positions never see a later token
    assert not torch.allclose(a[:, 7], b[:, 7])
    padded = torch.cat([x, torch.zeros(2, 5, dtype=torch.long)], dim=1)  # right padding changes nothing real
    assert torch.allclose(model(padded)[:, :12], a, atol=1e-5)
    assert model.generator.weight is model.embed.weight
    assert count_parameters(model) == closed_form_lm_parameters(cfg, 50)
    assert not any("cross" in name for name, _ in model.named_parameters())  # no cross-attention
    assert len(model.layers) == cfg.N
    untied = build_lm(model_config("base", **SMALL_MODEL, positional=positional, tie="none"), 50)
    assert untied.generator.weight is not untied.embed.weight
    assert count_parameters(untied) == closed_form_lm_parameters(untied.cfg, 50)
    tied = build_lm(dataclasses.replace(untied.cfg, tie="all"), 50)
    assert count_parameters(untied) - count_parameters(tied) == 50 * SMALL_MODEL["d_model"]  # one more V x d matrix


def test_files_text_corpus_is_one_side_with_held_out_lines(tmp_path):
    lines = [f"line {i} of the text with words {' '.join('w%d' % (i * j % 17) for j in range(5))}" for i in range(60)]
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = load_lm_corpus(f"files:{text}", 64, tmp_path / "data")
    sizes = corpus.meta["sizes"]
    assert sizes == {"train": 54, "dev": 3, "test": 3} and corpus.meta["langs"] == ["text"]
    held = set(corpus.split("dev").tgt_text) | set(corpus.split("test").tgt_text)
    assert held <= set(lines) and not held & set(corpus.split("train").tgt_text)
    assert all(len(s) == 0 for s in corpus.split("train").src)  # batched as targets of empty sources
