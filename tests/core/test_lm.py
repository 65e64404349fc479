"""task=lm: the decoder-only language model, its bits per byte, its data side, specs, sweeps and reports."""

import csv
import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
import torch
import yaml

from sweeps.cli import main as tsweep_main
from sweeps.spec import SpecError, load_spec, parse_spec, plan
from tests.helpers import ROOT, SMALL_MODEL
from transformer_core import rundir
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


def test_tsweep_train_task_lm_at_smoke_size(tmp_path, fixture_data_dir, capsys):
    """The real CLI: result.json, metrics.jsonl and MLflow-bound keys of a language model; bad input in one line."""
    work = tmp_path / "lm"
    args = ["train", "--workdir", str(work), "--profile", "smoke", "--quiet", "--data-dir", str(fixture_data_dir)]
    assert tsweep_main([*args, "--set", "task=lm", "direction=en", "eval_every=10"]) == 0
    out = capsys.readouterr().out
    assert "bits/byte" in out and "BLEU" not in out
    result = json.loads((work / rundir.RESULT).read_text())
    assert result["status"] == "finished" and result["task"] == "lm" and result["lang"] == "en"
    for key in ("dev_ppl", "test_ppl", "dev_bpb", "test_bpb"):
        assert isinstance(result[key], float) and 0 < result[key] < math.inf, key
    assert not {"dev_bleu", "test_bleu", "dev_chrf", "sacrebleu_signature"} & set(result)
    assert (
        result["dev_bytes"]
        == (load_lm_corpus("bible-en-de", 400, fixture_data_dir).directory / "dev.text").stat().st_size
    )
    evals = [json.loads(x) for x in (work / rundir.METRICS).read_text().splitlines() if '"eval"' in x]
    assert [e["step"] for e in evals] == [10, 20] and evals[-1]["dev_bpb"] == result["dev_bpb"]
    assert all(e["dev_ce"] == pytest.approx(math.log(e["dev_ppl"])) for e in evals)
    tracked = [json.loads(x) for x in (work / rundir.TRACKING).read_text().splitlines()]
    logged = {k for rec in tracked for k in rec.get("metrics", {})}
    assert {"dev_ppl", "dev_bpb", "test_ppl", "test_bpb", "loss"} <= logged and "dev_bleu" not in logged
    samples = (work / "samples.txt").read_text(encoding="utf-8").splitlines()
    assert len(samples) == 4 and all(s.startswith("[") for s in samples)
    assert not (work / "dev.hyp").exists()
    for cmd in (["translate", str(work)], ["evaluate", "--run", str(work), "--corpus", "bible-en-de:test"]):
        rc = tsweep_main(cmd)  # a language model does not translate: one line, before any data is prepared
        err = capsys.readouterr().err
        assert rc == 2 and "is a language model (task lm)" in err and len(err.strip().splitlines()) == 1
    for bad, message in (
        (["task=lm", "N_enc=2"], "N_enc=2 is invalid with task=lm: a decoder-only model has no encoder"),
        (["task=lm", "direction=de-en"], "direction='de-en' is invalid with task=lm: allowed one language of"),
    ):
        rc = tsweep_main(["train", "--workdir", str(tmp_path / "bad"), "--profile", "smoke", "--set", *bad])
        err = capsys.readouterr().err
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not (tmp_path / "bad").exists()


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


def test_lm_spec_plans_at_cpu_and_smoke_and_refuses_what_an_lm_cannot_do():
    spec = load_spec(ROOT / "sweeps" / "specs" / "table3-lm.yaml")
    assert (spec.task, spec.metric, spec.mode, spec.adaptive) == ("lm", "dev_bpb", "min", {"min": 2, "max": 3})
    assert spec.name == "table3-lm"  # a corpus.direction once overwrote the spec's name with the corpus's
    for profile in ("cpu", "smoke"):
        trials = plan(spec, profile)
        assert len(trials) == (1 + 18) * 2 and {t.values["task"] for t in trials} == {"lm"}
        assert {t.row[0] for t in trials} == set("bABCDE") and "big" not in {t.row for t in trials}
    base = {"name": "t", "task": "lm", "corpus": {"name": "bible-en-de"}, "seeds": [1]}
    for doc, message in (
        ({"metric": "dev_bleu"}, "metric: 'dev_bleu' is invalid with task lm; allowed dev_ppl, dev_bpb"),
        ({"task": "mt"}, "task: 'mt' is invalid; allowed translation, lm"),
        ({"corpus": {"name": "bible-en-de", "direction": "de-en"}}, "corpus.direction: direction='de-en' is invalid"),
        (
            {"rows": {"X": [{"label": "x", "N_enc": 2}]}},
            "rows.X.x: at profile 'smoke': N_enc=1 is invalid with task=lm",  # ceil(2 / 6) at smoke
        ),
    ):
        with pytest.raises(SpecError, match="^" + re.escape(message)):
            plan(parse_spec({**base, **doc}), "smoke")
    translation = parse_spec({"name": "t", "seeds": [1]})
    assert "task" not in plan(translation, "smoke")[0].values  # translation trials keep their values and ids


def _lm_spec(path: Path) -> Path:
    doc = {"name": "lm-smoke", "task": "lm", "corpus": {"name": "bible-en-de", "direction": "en"}, "seeds": [1, 2],
           "rows": {"D": [{"label": "D1", "P_drop": 0.0}, {"label": "D3", "eps_ls": 0.0}]},
           "metric": "dev_bpb", "max_concurrent": 2}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))
    return path


def _check_lm_report(report: Path) -> None:
    md = (report / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| row |"))
    assert "bits/byte dev" in header and "PPL test" in header and "BLEU" not in header and "chrF" not in header
    assert "| D3 |" in md and "sacrebleu" not in md and not (report / "evalsets.csv").exists()
    claims = {c["claim"]: c for c in csv.DictReader((report / "claims.csv").open())}
    assert claims["D-ls-helps-bleu"]["verdict"] == "not measured"
    assert all(c["reading"] == "dev cross-entropy (nats, ln PPL)" for k, c in claims.items() if k != "D-ls-helps-bleu")
    assert "Claims not measured (stated in BLEU only: a language-model sweep has no BLEU): D-ls-helps-bleu." in md
    html = (report / "report.html").read_text()
    assert "BLEU dev" not in html and "bits/byte dev" in html
    table = (report / "table.csv").read_text().splitlines()[0].split(",")
    assert {"bpb_dev", "bpb_test", "ppl_test"} <= set(table) and not [c for c in table if "bleu" in c]
    rows = {r["row"]: r for r in csv.DictReader((report / "table.csv").open())}
    assert all(int(float(r["n"])) >= 1 for r in rows.values())  # seeds counted on the reading judged, not BLEU


def test_lm_trials_without_ray_make_a_report_without_bleu(tmp_path, fixture_data_dir):
    """The report of an LM sweep from two trials trained by train_and_evaluate into a sweep directory."""
    from analysis.report import write_report
    from transformer_core import train_and_evaluate
    from transformer_core.run_config import make_run_config

    spec = load_spec(_lm_spec(tmp_path / "lm.yaml"))
    trials = [t for t in plan(spec, "smoke") if t.row in ("base", "D3") and t.seed == 1]  # 2 trials: about 6 s
    sweep, entries = tmp_path / "sweep", {}
    for t in trials:
        train_and_evaluate(make_run_config(t.values), sweep / "trials" / t.trial_id)
        entries[t.trial_id] = {"group": t.group, "row": t.row, "seed": t.seed, "paper": t.paper, "values": t.values,
                               "config_hash": t.config_hash}  # fmt: skip
        rundir.write_json(sweep / "trials" / t.trial_id / "trial.json", {"id": t.trial_id, **entries[t.trial_id]})
    state = {"name": "lm-smoke", "spec": "lm.yaml", "profile": "smoke", "profile_rules": {}, "plan": entries}
    rundir.write_json(sweep / "sweep.json", {**state, "trials": list(entries)})
    _check_lm_report(write_report(sweep, samples=10))
