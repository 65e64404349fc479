"""task=lm through the sweep layer: tsweep train, a spec's plan, a report of LM trials (the model itself:
tests/core/test_lm.py)."""

import csv
import json
import math
import re
from pathlib import Path

import pytest
import yaml

from sweeps.cli import main as tsweep_main
from sweeps.spec.sweep_spec import SpecError, load_spec, parse_spec, plan
from tests.helpers import ROOT
from transformer_core import rundir
from transformer_core.data.monolingual import load_lm_corpus


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
    from analysis.report.writers import write_report
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
