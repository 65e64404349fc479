"""tsweep evaluate / translate and chrF on the fixture corpus: a 2x2 smoke sweep (Ray) scored on a held-out set,
locally and uploaded to a file:// URI."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.data.collect import collect
from analysis.report.evalsets import evaluation_sets
from tests.helpers import ROOT, copy_sweep

SMOKE = ROOT / "tests" / "specs" / "smoke.yaml"
UNSEEN = "Ωμέγα ☃"  # characters the fixture's vocabulary has never seen


def tsweep(*args, env=None, stdin=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "sweeps.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def env(fixture_corpus, fixture_data_dir):
    threads = {"OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    return dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), **threads)


@pytest.fixture(scope="module")
def held(fixture_corpus, tmp_path_factory):
    """A held-out files: set from fixture text (Mark, never trained on), with an empty source line and unseen
    characters."""
    d = tmp_path_factory.mktemp("held")
    src = (fixture_corpus.directory / "dev.src").read_text(encoding="utf-8").splitlines()[:5]
    tgt = (fixture_corpus.directory / "dev.tgt").read_text(encoding="utf-8").splitlines()[:5]
    (d / "held.en").write_text("\n".join([*src, "", f"{UNSEEN} and the word"]) + "\n", encoding="utf-8")
    (d / "held.de").write_text("\n".join([*tgt, "Und", "und das Wort"]) + "\n", encoding="utf-8")
    return f"files:{d / 'held.en'},{d / 'held.de'}"


@pytest.fixture(scope="module")
def sweep(env, smoke_sweep, tmp_path_factory):
    """A copy of the session's smoke sweep (tests/specs/smoke.yaml, 2 rows x 2 seeds): this module writes evals."""
    return copy_sweep(smoke_sweep[0], tmp_path_factory.mktemp("evalsweep") / "sweep")


def trials(sweep):
    return sorted((sweep / "trials").iterdir())


# ---------------------------------------------------------------------------------------------- the sweep
def test_sweep_evaluated_on_a_held_out_set_then_skipped(sweep, held, env):
    assert all(
        {"dev_chrf", "test_chrf", "chrf_signature"} <= set(json.loads((t / "result.json").read_text()))
        for t in trials(sweep)
    )
    r = tsweep("evaluate", str(sweep), "--corpus", held, "--num-cpus", "2", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "4 evaluated" in r.stdout and "evaluate held" in r.stderr  # the progress bar
    stamps = {}
    for t in trials(sweep):
        rec = json.loads((t / "evals" / "held.json").read_text())
        assert rec["sentences"] == 7 and rec["averaged_checkpoints"] == [20] and rec["empty_sources"] == 1
        assert rec["sacrebleu_signature"].startswith("nrefs:1") and "nc:6" in rec["chrf_signature"]
        assert 0 <= rec["bleu"] <= 100 and 0 <= rec["chrf"] <= 100 and rec["ppl"] > 1
        assert rec["unknown_chars"]["source"] == len(UNSEEN.replace(" ", "")) and rec["unknown_pieces"]["source"] >= 2
        hyps = (t / "evals" / "held.hyp").read_text().split("\n")[:-1]
        assert len(hyps) == 7 and hyps[5] == ""
        stamps[t.name] = (t / "evals" / "held.json").stat().st_mtime_ns
    client, state = _mlflow(sweep)
    runs = client.search_runs([state["experiment_id"]], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    assert len(runs) == 4 and {x.info.status for x in runs} == {"FINISHED"}  # scores added, state untouched
    for run in runs:
        assert {"held_bleu", "held_chrf", "held_ppl", "test_chrf", "dev_chrf"} <= set(run.data.metrics)
        assert run.data.tags["held_fingerprint"] == rec["fingerprint"]
        assert {a.path for a in client.list_artifacts(run.info.run_id, "evals")} == {
            "evals/held.json",
            "evals/held.hyp",
        }

    again = tsweep("evaluate", str(sweep), "--corpus", held, "--rows", "base,D1", env=env)
    assert again.returncode == 0 and "4 skipped" in again.stdout, again.stdout + again.stderr
    assert {t.name: (t / "evals" / "held.json").stat().st_mtime_ns for t in trials(sweep)} == stamps

    report = evaluation_sets(collect(sweep), sweep)
    assert report.names == ["test", "held"] and list(report.columns["row"]) == ["base", "D1"]
    assert ["row", "chrF dev", "chrF test", "BLEU held", "chrF held"] == list(report.columns.columns)
    held_claims = report.claims["held"].set_index(["claim", "reading"])
    assert held_claims.loc[("D-dropout-helps", "held BLEU"), "verdict"] != "not measured"
    assert "held" in report.notes[0] and "7 sentences" in report.notes[0]


def _mlflow(sweep):
    from mlflow.tracking import MlflowClient

    from sweeps.run.tracking import resolve_uri

    state = json.loads((sweep / "sweep.json").read_text())
    return MlflowClient(tracking_uri=resolve_uri(state["uri"], sweep)), state


def test_run_evaluation_reproduces_the_runs_test_bleu(sweep, env):
    trial = trials(sweep)[0]
    r = tsweep("evaluate", "--run", str(trial), "--corpus", "bible-en-de:test", "--name", "romans", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rec, result = (
        json.loads((trial / "evals" / "romans.json").read_text()),
        json.loads((trial / "result.json").read_text()),
    )
    assert rec["bleu"] == pytest.approx(result["test_bleu"]) and rec["chrf"] == pytest.approx(result["test_chrf"])
    assert rec["ppl"] == pytest.approx(result["test_ppl"], rel=1e-5)
    assert (trial / "evals" / "romans.hyp").read_text() == (trial / "test.hyp").read_text()


def test_translate_keeps_order_empty_lines_and_survives_a_long_line(sweep, env, fixture_corpus):
    long_line = " ".join(("and the word was with God " * 400).split()[:2000])
    r = tsweep(
        "translate", str(sweep), "--row", "base", "--seed", "1", stdin=f"In the beginning\n\n{long_line}\n", env=env
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert len(out) == 4 and out[3] == "" and out[1] == "" and out[0] and out[2]
    assert "stdin line 3" in r.stderr and "truncated" in r.stderr
    base = next(t for t in trials(sweep) if t.name.startswith("base-s1-"))
    test_src = fixture_corpus.directory / "test.src"
    r = tsweep("translate", str(base), "--input", str(test_src), env=env)  # detokenised like test.hyp
    assert r.returncode == 0 and r.stdout == (base / "test.hyp").read_text(), r.stderr


def test_bad_input_is_one_line_exit_2_and_nothing_written(sweep, held, env, tmp_path):
    (tmp_path / "three.en").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "two.de").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "empty.de").write_text("", encoding="utf-8")
    (tmp_path / "latin1.de").write_bytes("Grüße\nzwei\ndrei\n".encode("latin-1"))
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "sweep.json").write_text((sweep / "sweep.json").read_text())  # planned, nothing finished
    none = tmp_path / "none"
    cases = [  # (arguments, what the one line says, the file it names)
        (
            ("evaluate", str(sweep), "--corpus", f"files:{tmp_path / 'three.en'},{tmp_path / 'two.de'}"),
            "line count",
            "two.de",
        ),
        (
            ("evaluate", str(sweep), "--corpus", f"files:{tmp_path / 'three.en'},{tmp_path / 'empty.de'}"),
            "empty",
            "empty.de",
        ),
        (
            ("evaluate", str(sweep), "--corpus", f"files:{tmp_path / 'three.en'},{tmp_path / 'latin1.de'}"),
            "UTF-8",
            "latin1.de",
        ),
        (("evaluate", str(none), "--corpus", held), "no finished trial", str(none)),
        (("evaluate", str(sweep), "--corpus", held, "--rows", "Z9"), "not in sweep", "Z9"),
        (("translate", str(sweep), "--input", str(tmp_path / "latin1.de")), "UTF-8", "latin1.de"),
    ]
    for args, message, name in cases:
        r = tsweep(*args, env=env)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and message in err[0] and name in err[0] and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stdout == ""
    assert not any((t / "evals" / "three.json").exists() or (t / "evals" / "three.hyp").exists() for t in trials(sweep))
    assert not (tmp_path / "none" / "trials").exists()


# ---------------------------------------------------------------------------------------------- a sweep at a URI
# file:// here; s3:// and gs:// take the same path through pyarrow (tests/e2e/test_storage_e2e.py runs a sweep on s3).
def _upload(local: Path, remote: Path) -> Path:
    """The local sweep copied to ``remote`` with its MLflow artifacts pointing there, as a sweep run at the URI has
    them (no evaluations: test_evaluate scores the same sweep)."""
    return copy_sweep(local, remote, leave_out=("evals",))


def _held_out(fixture_corpus, directory: Path) -> str:
    """Seven verses of Mark (the fixture's dev book: never trained on), other than test_evaluate's set."""
    directory.mkdir(parents=True, exist_ok=True)
    for side, name in (("src", "mark.en"), ("tgt", "mark.de")):
        lines = (fixture_corpus.directory / f"dev.{side}").read_text(encoding="utf-8").splitlines()[10:17]
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"files:{directory / 'mark.en'},{directory / 'mark.de'}"


def _children(sweep_dir: Path):
    from mlflow.tracking import MlflowClient

    state = json.loads((sweep_dir / "sweep.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{sweep_dir / 'mlflow.db'}")
    runs = client.search_runs([state["experiment_id"]], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    return client, runs


def _stamps(remote: Path, name: str) -> dict:
    return {p.relative_to(remote).as_posix(): p.stat().st_mtime_ns for p in [*remote.glob(f"trials/*/evals/{name}.*")]}


def _check_scored(remote: Path, name: str, sentences: int) -> None:
    """evals/NAME.{json,hyp} in every trial at the URI, and the scores on each trial's MLflow child run there."""
    for t in trials(remote):
        rec = json.loads((t / "evals" / f"{name}.json").read_text())
        assert rec["sentences"] == sentences and 0 <= rec["bleu"] <= 100 and rec["ppl"] > 1
        assert rec["averaged_checkpoints"] == json.loads((t / "result.json").read_text())["averaged_checkpoints"]
        assert len((t / "evals" / f"{name}.hyp").read_text().split("\n")[:-1]) == sentences
    client, runs = _children(remote)
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}  # scores added, states untouched
    for run in runs:
        assert {f"{name}_bleu", f"{name}_chrf", f"{name}_ppl", f"{name}_unknown_chars"} <= set(run.data.metrics)
        assert run.data.tags[f"{name}_fingerprint"] == rec["fingerprint"]
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "evals")}
        assert artifacts == {f"evals/{name}.json", f"evals/{name}.hyp"}
    assert len(list((remote / "mlartifacts").rglob(f"evals/{name}.json"))) == 4  # artifacts at the URI
    assert not (remote / "sweep.lock").exists()  # the lock evaluate held while writing mlflow.db is gone


def test_sweep_at_a_uri_is_scored_there_then_skipped(sweep, fixture_corpus, tmp_path, monkeypatch, capsys):
    from sweeps.cli import main

    remote = _upload(sweep, tmp_path / "bucket" / "sweep")
    uri, corpus = remote.as_uri(), _held_out(fixture_corpus, tmp_path / "sets")
    monkeypatch.setenv("TSWEEP_SCRATCH_DIR", str(tmp_path / "scratch"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    capsys.readouterr()
    assert main(["evaluate", uri, "--corpus", corpus, "--num-cpus", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "4 evaluated" in out and "evaluation set mark: 7 sentences" in out, out
    _check_scored(remote, "mark", 7)
    scratch = tmp_path / "scratch"
    assert not list(scratch.rglob("*.pt")) and not any(any(p.iterdir()) for p in scratch.glob("*/evaluate"))
    view = next(scratch.glob("*/view"))  # the local view has the results as the URI has them (the report reads it)
    assert all((view / "trials" / t.name / "evals" / "mark.json").exists() for t in trials(remote))
    stamps, db = _stamps(remote, "mark"), (remote / "mlflow.db").stat().st_mtime_ns

    shutil.rmtree(scratch)  # another machine: nothing local, the earlier results read from the URI
    assert main(["evaluate", uri, "--corpus", corpus, "--rows", "base,D1", "--num-cpus", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "4 skipped" in out, out
    assert _stamps(remote, "mark") == stamps and (remote / "mlflow.db").stat().st_mtime_ns == db  # nothing sent

    (tmp_path / "planned").mkdir()
    (tmp_path / "planned" / "sweep.json").write_text((remote / "sweep.json").read_text())
    (remote / "sweep.lock").write_text(json.dumps({"pid": 1, "host": "elsewhere", "time": 0, "token": "t"}))
    cases = [  # (location, what the one line says); none writes anything there
        ((tmp_path / "absent").as_uri(), "not a sweep directory"),
        ((tmp_path / "planned").as_uri(), "has no finished trial (4 pending)"),
        ("nosuchfs://bucket/sweep", "cannot be opened"),
        (uri, "is being run by pid 1 on elsewhere"),  # a driver owns mlflow.db: no second writer
    ]
    for location, message in cases:
        assert main(["evaluate", location, "--corpus", corpus, "--name", "other", "--quiet"]) == 2, location
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert captured.out == "" and len(err) == 1 and message in err[0] and location in err[0], captured.err
    assert not (tmp_path / "absent").exists() and [p.name for p in (tmp_path / "planned").iterdir()] == ["sweep.json"]
    assert not list(remote.glob("trials/*/evals/other.*"))


@pytest.mark.slow  # a smoke sweep of its own at the URI (~1-2.5 min on 2 cores); the default test uploads one
def test_smoke_sweep_run_at_a_file_uri_is_evaluated_there(env, fixture_corpus, tmp_path):
    env = dict(env, TSWEEP_SCRATCH_DIR=str(tmp_path / "scratch"))
    remote = tmp_path / "bucket" / "sweep"

    def tsweep(*args):
        return subprocess.run(
            [sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900
        )

    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", remote.as_uri(), "--num-cpus", "2")
    assert r.returncode == 0 and "4 finished" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    shutil.rmtree(tmp_path / "scratch")  # evaluated from another machine
    corpus = _held_out(fixture_corpus, tmp_path / "sets")
    r = tsweep("evaluate", remote.as_uri(), "--corpus", corpus, "--num-cpus", "2")
    assert r.returncode == 0 and "4 evaluated" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    _check_scored(remote, "mark", 7)
    again = tsweep("evaluate", remote.as_uri(), "--corpus", corpus)
    assert again.returncode == 0 and "4 skipped" in again.stdout, again.stdout + again.stderr
    report = tsweep("report", remote.as_uri(), "--bootstrap", "50")  # the set's columns, read from the URI
    assert report.returncode == 0, report.stderr
    md = (remote / "report" / "report.md").read_text()
    assert "mark" in md and "7 sentences" in md
