"""Whole smoke sweeps through `tsweep run` (Ray, Optuna, MLflow): completion, a diverging row, resume after a
kill, an ASHA search, the batch calibration spec."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from sweeps.spec.sweep_spec import load_spec, plan
from tests.helpers import ROOT, tsweep, write_spec


@pytest.fixture(scope="module")
def env(fixture_corpus, fixture_data_dir):
    e = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    return e


def _mlflow_children(sweep_dir):
    from mlflow.tracking import MlflowClient

    from sweeps.run.tracking import resolve_uri

    state = json.loads((sweep_dir / "sweep.json").read_text())
    client = MlflowClient(tracking_uri=resolve_uri(state["uri"], sweep_dir))
    runs = client.search_runs([state["experiment_id"]], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    return client, state, runs


def test_smoke_sweep_completes_with_mlflow_runs(env, smoke_sweep, tmp_path):
    out, r, wall = smoke_sweep  # tests/e2e/conftest.py: run once, also read by test_evaluate and test_resume_safety
    print(f"smoke sweep wall time {wall:.1f}s")
    assert "4 finished" in r.stdout
    # the live view, stdout not a terminal: one plain line per trial event, in rows and seeds, no Tune boxes
    assert "base s1: started" in r.stdout and "D1 s2: finished: dev BLEU" in r.stdout
    assert "_trainable_" not in r.stdout and "trial_index" not in r.stdout and "TensorBoard" not in r.stdout
    assert "Current best trial" not in r.stdout and "╭" not in r.stdout
    client, state, runs = _mlflow_children(out)
    assert client.get_run(state["parent_run_id"]).info.status == "FINISHED"
    assert len(runs) == 4 and {x.info.status for x in runs} == {"FINISHED"}
    # the default store is recorded relative to the sweep, and artifacts live in the sweep, not in $CWD/mlruns
    assert state["uri"] == "mlflow.db" and state["status"] == "finished"
    experiment = client.get_experiment(state["experiment_id"])
    assert experiment.artifact_location == (out / "mlartifacts").as_uri()
    assert not (ROOT / "mlruns").exists() and list((out / "mlartifacts").rglob("result.json"))
    assert (out / "sweep.lock").read_text() == ""  # released
    # Tune's CSV and JSON logs, which its results are read back from, and no TensorBoard logger: its tensorboardX
    # imported torch into the driver, which trains nothing
    assert len(list(out.glob("tune/*/progress.csv"))) == 4 and len(list(out.glob("tune/*/result.json"))) == 4
    assert not list(out.rglob("events.out.tfevents*"))
    assert json.loads((out.parent / "driver_modules.json").read_text()) == []
    assert {p.name for p in out.rglob("*.tmp")} == set()
    # two slots, four trials: a slot's worker process runs its next trial (reuse_actors), not a fresh one
    pids = {json.loads(p.read_text().splitlines()[0])["pid"] for p in (out / "trials").glob("*/sessions.jsonl")}
    assert 2 <= len(pids) < 4
    assert sorted((x.data.tags["row"], x.data.tags["seed"]) for x in runs) == [
        ("D1", "1"),
        ("D1", "2"),
        ("base", "1"),
        ("base", "2"),
    ]
    for run in runs:
        assert {"dev_bleu", "dev_ppl", "test_bleu", "loss"} <= set(run.data.metrics)
        assert run.data.tags["profile"] == "smoke" and len(run.data.tags["config_hash"]) == 12
        assert run.data.params["P_drop"] in ("0.0", "0.1")
        history = client.get_metric_history(run.info.run_id, "loss")
        assert len(history) >= 2
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"result.json", "test.hyp", "dev.hyp"} <= names
    status = tsweep("status", str(out), env=env)
    assert status.returncode == 0 and status.stdout.count("finished") >= 4
    written = tmp_path / "report"  # not into the shared sweep
    report = tsweep("report", str(out), "--bootstrap", "100", "--out", str(written), env=env)
    assert report.returncode == 0, report.stderr
    html = (written / "report.html").read_text()
    assert (
        "<table" in html
        and html.count("<img") == html.count("data:image/png;base64,") >= 1  # figures inline (their layout: analysis)
        and "| D1 |" in (written / "report.md").read_text()
    )


@pytest.mark.slow  # longest sweeps; make test-slow runs them
def test_diverging_row_fails_and_the_others_finish(env, tmp_path):
    spec = write_spec(tmp_path / "div.yaml", name="div", rows={"X": [{"label": "boom", "lr_scale": 1e30}]})
    out = tmp_path / "sweep"
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "2", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    _, _, runs = _mlflow_children(out)
    by_row = {x.data.tags["row"]: x for x in runs}
    assert by_row["boom"].info.status == "FAILED" and "non-finite" in by_row["boom"].data.tags["failure_reason"]
    assert by_row["base"].info.status == "FINISHED"
    boom = next((out / "trials").glob("boom-*"))
    assert len((boom / "attempts.jsonl").read_text().splitlines()) == 1  # recorded as failed, not retried
    assert "diverged" in tsweep("status", str(out), env=env).stdout


@pytest.mark.slow  # longest sweeps; make test-slow runs them
def test_interrupted_sweep_resumes_without_retraining_finished_trials(env, tmp_path):
    spec = write_spec(
        tmp_path / "three.yaml", name="three", seeds=[1, 2, 3], max_concurrent=1, train={"steps": 40, "eval_every": 20}
    )
    out = tmp_path / "sweep"
    cmd = [
        sys.executable,
        "-m",
        "sweeps.cli",
        "run",
        str(spec),
        "--profile",
        "smoke",
        "--out",
        str(out),
        "--num-cpus",
        "1",
    ]
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 300
    while time.time() < deadline and not list((out / "trials").glob("*/result.json")):
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = {p.parent.name for p in (out / "trials").glob("*/result.json")}
    assert 1 <= len(finished_before) < 3
    time.sleep(2)
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--resume", "--num-cpus", "1", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "taking over the stale lock" in r.stderr  # the killed driver's lock body names a dead pid
    trials = sorted((out / "trials").iterdir())
    assert len(trials) == 3 and all((t / "result.json").exists() for t in trials)
    attempts_after = {}
    for t in trials:
        attempts = attempts_after[t.name] = len((t / "attempts.jsonl").read_text().splitlines())
        if t.name in finished_before:
            assert attempts == 1, t.name
    again = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), env=env)
    assert again.returncode == 2 and "--resume" in again.stderr
    done = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--resume", "--num-cpus", "1", env=env)
    assert done.returncode == 0 and "3 of 3 trials already have a result: not run again" in done.stdout
    assert all(len((t / "attempts.jsonl").read_text().splitlines()) == attempts_after[t.name] for t in trials)
    _, _, runs = _mlflow_children(out)
    assert len(runs) == 3 and {x.info.status for x in runs} == {"FINISHED"}  # none set back to RUNNING


@pytest.mark.slow  # its own search; the session's smoke search covers Optuna end to end, test_search_e2e ASHA
def test_optuna_search_with_asha_stops_some_trials_and_records_the_study(env, tmp_path):
    import optuna

    spec = write_spec(
        tmp_path / "search.yaml",
        name="search",
        max_concurrent=1,
        train={"steps": 30, "eval_every": 10},
        search={
            "samples": 3,
            "space": {
                "lr_scale": {"type": "loguniform", "low": 0.3, "high": 3.0},
                "warmup": {"type": "int", "low": 5, "high": 20},
            },
        },
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2, "max_t": 4},
    )
    out = tmp_path / "sweep"
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "1", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    study = optuna.load_study(study_name="search", storage=f"sqlite:///{out / 'optuna.db'}")
    assert len(study.trials) == 3
    trials = list((out / "trials").iterdir())
    assert len(trials) == 3  # each suggestion is its own trial (its own config hash)
    assert len({json.loads((t / "trial.json").read_text())["values"]["lr_scale"] for t in trials}) == 3
    status = tsweep("status", str(out), env=env).stdout
    assert "running" not in status and "pending" not in status
    _, _, runs = _mlflow_children(out)
    assert len(runs) == 3 and all(x.info.status in ("FINISHED", "KILLED") for x in runs)


@pytest.mark.slow  # longest sweeps; make test-slow runs them
def test_the_batch_calibration_spec_runs_at_smoke_with_the_tokens_of_a_trial_fixed(env, tmp_path):
    """sweeps/specs/calibrate-cpu-batch.yaml as written (fewer samples), through Ray and Optuna at the smoke
    profile: every sample finishes, and whatever batch it drew, its steps x batch is the base row's."""
    doc = yaml.safe_load((ROOT / "sweeps" / "specs" / "calibrate-cpu-batch.yaml").read_text())
    doc["search"]["samples"] = 3
    doc["max_concurrent"] = 1
    spec = tmp_path / "calibrate.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "sweep"
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "1", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trials = sorted((out / "trials").iterdir())
    assert len(trials) == 3
    base = plan(load_spec(spec), "smoke")[0].values
    for t in trials:
        values = json.loads((t / "trial.json").read_text())["values"]
        assert values["steps"] * values["tokens_per_batch"] == base["steps"] * base["tokens_per_batch"]
        assert json.loads((t / "result.json").read_text())["status"] == "finished"
