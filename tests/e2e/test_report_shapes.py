"""`tsweep report` for every shape a user can run, end to end: a real `tsweep run` of a tiny smoke sweep through
the CLI, then the report, before and after `tsweep evaluate` with a small out-of-domain set.  Shapes: one seed
per row (with a row that diverges in warmup), one row with two seeds, and every trial diverged.  Each sweep is
built once for the module; the tests that write into a sweep (symlinks, broken checkpoints) work on a copy.

The same sweeps check that evaluate and report write only inside the sweep directory, and that translate on an
unreadable checkpoint ends in one line."""

import csv
import io
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, refused

pytestmark = pytest.mark.e2e
OOD = [  # a few lines outside the corpus's domain (the fixture is Bible verses)
    ("The train leaves at seven.", "Der Zug fährt um sieben ab."),
    ("My computer is broken.", "Mein Computer ist kaputt."),
    ("We drink coffee in the morning.", "Wir trinken morgens Kaffee."),
    ("The museum is closed today.", "Das Museum ist heute geschlossen."),
    ("She plays football with her friends.", "Sie spielt mit ihren Freunden Fußball."),
    ("The weather will be cold tomorrow.", "Das Wetter wird morgen kalt."),
]


def tsweep(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "sweeps.cli", *map(str, args)],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip


@pytest.fixture(scope="module")
def env(fixture_corpus, fixture_data_dir):
    return dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")


@pytest.fixture(scope="module")
def ood(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("ood")
    (d / "ood.en").write_text("".join(en + "\n" for en, _ in OOD), encoding="utf-8")
    (d / "ood.de").write_text("".join(de + "\n" for _, de in OOD), encoding="utf-8")
    return f"files:{d / 'ood.en'},{d / 'ood.de'}"


def _report(out: Path, env) -> dict:
    """`tsweep report` of the sweep: its stderr and the files it wrote, read now (a later report replaces them)."""
    r = tsweep("report", out, "--bootstrap", "50", env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    files = {p.name: p.read_text(encoding="utf-8") for p in (out / "report").iterdir() if p.suffix != ".png"}
    return {"stderr": r.stderr, **files}


def _shape(tmp_path_factory, env, ood, name: str, evaluate: bool, **doc) -> dict:
    """Run a smoke sweep, report it, then (``evaluate``) score it on the out-of-domain set and report again."""
    d = tmp_path_factory.mktemp(name)
    spec = d / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({"name": name, "corpus": {"name": "bible-en-de"}, **doc}))
    out = d / "sweep"
    r = tsweep("run", spec, "--profile", "smoke", "--out", out, "--num-cpus", "2", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shape = {"out": out, "run": r, "before": _report(out, env)}
    ev = tsweep("evaluate", out, "--corpus", ood, "--name", "ood", "--num-cpus", "2", "--quiet", env=env)
    shape["evaluate"] = ev
    if evaluate:
        assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
        shape["after"] = _report(out, env)
    return shape


@pytest.fixture(scope="module")
def one_seed(tmp_path_factory, env, ood):
    """The most common first sweep: base and D1, one seed each, and a row that blows up during warmup."""
    rows = {"D": [{"label": "D1", "P_drop": 0.0}], "X": [{"label": "boom", "lr_scale": 1e6}]}
    return _shape(tmp_path_factory, env, ood, "oneseed", True, seeds=[1], rows=rows, claims="table3")


@pytest.fixture(scope="module")
def one_row(tmp_path_factory, env, ood):
    return _shape(tmp_path_factory, env, ood, "onerow", True, seeds=[1, 2])


@pytest.fixture(scope="module")
def all_diverged(tmp_path_factory, env, ood):
    rows = {"D": [{"label": "D1", "P_drop": 0.0}]}
    base = {"preset": "base", "lr_scale": 1e6}
    return _shape(tmp_path_factory, env, ood, "alldiverged", False, seeds=[1], rows=rows, base=base)


def _table(md: str, first_cell: str = "row") -> list[dict]:
    """The markdown table of report.md whose header starts with ``first_cell``, as dicts."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return [dict(zip(rows[0], r)) for r in rows[2:]]


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


NUMBERS = ("PPL dev (ours)", "ln PPL ± CI", "BLEU dev (ours)", "BLEU test", "chrF dev", "chrF test")


def test_one_seed_sweep_reports_means_without_intervals(one_seed):
    """The crash case (evalsets._fmt given a None half-width): one seed, no seed noise, no ± anywhere."""
    assert "2 finished" in one_seed["run"].stdout and "1 diverged" in one_seed["run"].stdout
    table = {r["row"]: r for r in _table(one_seed["before"]["report.md"])}
    assert set(table) == {"base", "D1", "boom"}
    for row in ("base", "D1"):
        assert table[row]["status"] == "1 finished" and table[row]["n"] == "1/1"
        assert all(table[row][c] not in ("", "-") and "±" not in table[row][c] for c in NUMBERS), table[row]
    assert "no seed replicates" in one_seed["before"]["report.md"]


def test_a_diverged_row_shows_as_diverged_not_as_numbers(one_seed):
    boom = {r["row"]: r for r in _table(one_seed["before"]["report.md"])}["boom"]
    assert boom["status"] == "1 diverged" and boom["n"] == "0/1"
    assert all(boom[c] == "-" for c in NUMBERS), boom
    seeds = {r["row"]: r for r in _csv(one_seed["before"]["seeds.csv"])}
    assert seeds["boom"]["status"] == "diverged" and seeds["boom"]["dev_bleu"] == "" and seeds["boom"]["dev_ppl"] == ""
    assert "during warmup" in seeds["boom"]["reason"] or "non-finite" in seeds["boom"]["reason"]
    problems = {r["row"]: r for r in _table(one_seed["before"]["report.md"], "trial_id")}
    assert set(problems) == {"boom"} and problems["boom"]["status"] == "diverged"
    versus = [r for r in _csv(one_seed["before"]["versus-base.csv"]) if r["row"] == "boom"]
    assert versus and {r["outcome"] for r in versus} == {"diverged"}, versus


def test_one_seed_sweep_reports_an_evaluation_set(one_seed):
    ev = one_seed["evaluate"]
    assert "2 evaluated" in ev.stdout and "boom" not in ev.stdout  # a diverged trial is not scored
    after = one_seed["after"]
    table = {r["row"]: r for r in _table(after["report.md"])}
    assert table["base"]["BLEU ood"] not in ("", "-") and "±" not in table["base"]["BLEU ood"]
    assert table["boom"]["BLEU ood"] == "-" and table["boom"]["chrF ood"] == "-"
    assert "## The paper's claims on ood" in after["report.md"] and "**ood** (files:" in after["report.md"]
    assert {r["row"] for r in _csv(after["evalsets.csv"])} == {"base", "D1", "boom"}
    assert "claims-ood.csv" in after and "claims-ood.csv" not in one_seed["before"]


@pytest.mark.slow  # its own sweep; evaluation sets in reports are covered by test_evaluate_e2e
def test_one_row_sweep_reports_with_and_without_an_evaluation_set(one_row):
    for report in (one_row["before"], one_row["after"]):
        table = _table(report["report.md"])
        assert [r["row"] for r in table] == ["base"] and table[0]["status"] == "2 finished"
        assert table[0]["n"] == "2/2" and "±" in table[0]["BLEU dev (ours)"]  # two seeds: an interval
        assert "None: every trial finished." in report["report.md"]
    assert "BLEU ood" not in one_row["before"]["report.md"]
    assert _table(one_row["after"]["report.md"])[0]["BLEU ood"] not in ("", "-")


@pytest.mark.slow  # its own sweep; rows whose every seed diverged are reported in tests/analysis/test_analysis.py
def test_all_diverged_sweep_reports_every_row_as_diverged(all_diverged):
    assert "2 diverged" in all_diverged["run"].stdout
    report = all_diverged["before"]["report.md"]
    table = {r["row"]: r for r in _table(report)}
    assert set(table) == {"base", "D1"}
    for r in table.values():
        assert r["status"] == "1 diverged" and all(r[c] == "-" for c in NUMBERS), r
    assert "0/2 trials finished; corpus bible-en-de (fingerprint " in report and "torch None" not in report
    assert "sacrebleu: `None`" not in report and "None steps" not in report
    assert {r["status"] for r in _csv(all_diverged["before"]["seeds.csv"])} == {"diverged"}
    ev = all_diverged["evaluate"]  # nothing to score: one line, no traceback
    assert ev.returncode == 2 and "has no finished trial (2 diverged): nothing to evaluate" in ev.stderr
    assert len(ev.stderr.strip().splitlines()) == 1


# --- writes stay inside the sweep ------------------------------------------------------------------------------
@pytest.fixture
def copy(one_seed, tmp_path) -> Path:
    """A copy of the one-seed sweep (after its evaluation) to plant symlinks and broken files in."""
    dst = tmp_path / "sweep"
    shutil.copytree(one_seed["out"], dst, symlinks=True)
    return dst


def _trial(sweep: Path, row: str) -> Path:
    return next((sweep / "trials").glob(f"{row}-s1-*"))


def test_evaluate_refuses_a_trial_that_is_a_symlink_out_of_the_sweep(copy, ood, tmp_path, capsys):
    trial = _trial(copy, "D1")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(trial, outside / trial.name)
    trial.symlink_to(outside / trial.name)
    shutil.rmtree(outside / trial.name / "evals")
    refused(["evaluate", copy, "--corpus", ood, "--name", "ood2"], capsys, f"trials/{trial.name}' resolves outside")
    assert not (outside / trial.name / "evals").exists()


def test_evaluate_refuses_an_evals_directory_that_leads_out(copy, ood, tmp_path, capsys):
    trial = _trial(copy, "base")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(trial / "evals")
    (trial / "evals").symlink_to(outside)
    refused(["evaluate", copy, "--corpus", ood, "--name", "ood2"], capsys, "evals' resolves outside the sweep")
    refused(["evaluate", "--run", trial, "--corpus", ood, "--name", "ood2"], capsys, "outside the run directory")
    assert list(outside.iterdir()) == []


def test_report_refuses_a_report_directory_or_file_that_leads_out(copy, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(copy / "report")
    (copy / "report").symlink_to(outside)
    refused(["report", copy], capsys, "report' resolves outside the sweep directory")
    assert list(outside.iterdir()) == []
    (copy / "report").unlink()
    (copy / "report").mkdir()
    victim = outside / "notes.txt"
    victim.write_text("mine\n")
    (copy / "report" / "report.md").symlink_to(victim)
    refused(["report", copy], capsys, "report.md' resolves outside the sweep directory")
    assert victim.read_text() == "mine\n"


class _Shell:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "pickle", "no weights"])
def test_translate_on_an_unreadable_checkpoint_is_one_line(copy, tmp_path, capsys, damage):
    import torch

    checkpoint = next((_trial(copy, "base") / "checkpoints").glob("step-*.pt"))
    marker = tmp_path / "ran"
    if damage == "truncated":
        checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    elif damage == "garbage":
        checkpoint.write_bytes(os.urandom(4096))
    elif damage == "pickle":
        checkpoint.write_bytes(pickle.dumps(_Shell(marker)))
    else:
        torch.save({"step": 20}, checkpoint)
    refused(["translate", copy, "--row", "base"], capsys, f"checkpoint {checkpoint.name} is unreadable")
    assert not marker.exists()
