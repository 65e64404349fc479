import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from sweeps.spec import load_spec, plan
from tests.helpers import ROOT

SMOKE = ROOT / "tests" / "specs" / "smoke.yaml"


@pytest.fixture(scope="module")
def env(fixture_corpus, fixture_data_dir):
    e = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    return e


def tsweep(*args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


def write_spec(path, **doc):
    base = {"name": "t", "corpus": {"name": "bible-en-de"}, "seeds": [1]}
    path.write_text(yaml.safe_dump({**base, **doc}))
    return path


def test_table3_spec_has_every_row_in_paper_units():
    spec = load_spec(ROOT / "sweeps" / "specs" / "table3.yaml")
    labels = [r.label for r in spec.rows]
    assert labels == [
        "base",
        "A1",
        "A2",
        "A3",
        "A4",
        "B1",
        "B2",
        "C1",
        "C2",
        "C3",
        "C4",
        "C5",
        "C6",
        "C7",
        "D1",
        "D2",
        "D3",
        "D4",
        "E1",
        "big",
    ]
    paper = {t.row: t for t in plan(spec, "paper")}
    assert paper["A1"].values["h"] == 1 and paper["A1"].values["d_k"] == 512
    assert paper["big"].values["steps"] == 300_000 and paper["base"].values["steps"] == 100_000
    assert paper["D3"].values["eps_ls"] == 0.0 and paper["E1"].values["positional"] == "learned"
    cpu = {t.row: t for t in plan(spec, "cpu")}
    assert cpu["base"].values["d_model"] == 128 and cpu["C1"].values["N"] == 1 and cpu["C3"].values["N"] == 4
    assert cpu["base"].profile["profile"] == "cpu" and cpu["base"].profile["width"] == 0.25
    assert "big" not in cpu and len(cpu) == 19  # big is out of the cpu budget
    assert len({t.trial_id for t in plan(spec, "cpu")}) == 38  # two seeds of each row first (adaptive min)
    assert spec.adaptive == {"min": 2, "max": 3} and spec.budget == 3600
    assert len({t.trial_id for t in plan(spec, "gpu")}) == 40


def test_plan_command_prints_the_trial_table():
    r = tsweep("plan", str(ROOT / "sweeps" / "specs" / "table3.yaml"), "--profile", "cpu")
    assert r.returncode == 0, r.stderr
    assert "38 trials" in r.stdout and "row big left out" in r.stdout and "nothing was run" in r.stdout
    assert sum(line.startswith(("base ", "A ", "B ", "C ", "D ", "E ", "big ")) for line in r.stdout.splitlines()) == 38


MALFORMED = [
    ({"nmae": "x"}, "spec: unknown key 'nmae' (did you mean 'name'?)"),
    ({"rows": {"A": [{"label": "A1", "hh": 2}]}}, "rows.A[0]: unknown key 'hh' (did you mean 'h'?)"),
    ({"rows": {"A": [{"h": 0}]}}, "rows.A.A1: at profile 'smoke': h=0 is invalid"),
    (
        {"rows": {"A": [{"positional": "rotary"}]}},
        "positional='rotary' is invalid: allowed one of 'sinusoidal', 'learned'",
    ),
    ({"seeds": []}, "seeds: [] is invalid"),
    ({"seeds": [1, 1]}, "seeds: [1, 1] repeats a seed"),
    ({"corpus": {"name": "wmt14"}}, "corpus.name: unknown corpus recipe 'wmt14'"),
    ({"metric": "bleu"}, "metric: 'bleu' is invalid; allowed dev_bleu"),
    ({"mode": "maximize"}, "mode: 'maximize' is invalid; allowed max, min"),
    ({"scheduler": {"type": "hyperband"}}, "scheduler.type: 'hyperband' is invalid; allowed none, asha"),
    ({"resources": {"gpus": -1}}, "resources.gpus: -1 is invalid"),
    ({"max_concurrent": 0}, "max_concurrent: 0 is invalid"),
    (
        {"search": {"space": {"lr_scale": {"type": "loguniform", "low": 2, "high": 1}}}},
        "search.space.lr_scale: low (2) must be below high (1)",
    ),
    ({"rows": {"A": [{"label": "base", "h": 4}]}}, "rows.A[0].label: 'base' is used twice"),
    ({"rows": {"A": []}}, "rows.A: expected a non-empty list"),
    ({"base": {"preset": "huge"}}, "base.preset: 'huge' is invalid; allowed base, big"),
    ({"output": 5}, "output: 5 is invalid; allowed a directory path or a URI"),
]


@pytest.mark.parametrize("doc,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_specs_give_one_line_and_exit_2(tmp_path, doc, message, capsys):
    """In process (the CLI's main, as the console script calls it): validation fails before Ray or MLflow."""
    from sweeps.cli import main

    spec = write_spec(tmp_path / "bad.yaml", **doc)
    capsys.readouterr()
    rc, err = main(["plan", str(spec), "--profile", "smoke"]), capsys.readouterr().err
    assert rc == 2, err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    out = tmp_path / "out"
    assert main(["run", str(spec), "--profile", "smoke", "--out", str(out)]) == 2 and not out.exists()


def test_bad_yaml_file_and_profile_and_address(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    r = tsweep("plan", str(bad))
    assert r.returncode == 2 and "not valid YAML at line" in r.stderr
    r = tsweep("plan", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = tsweep("plan", str(SMOKE), "--profile", "laptop")
    assert r.returncode == 2 and "unknown profile 'laptop': allowed paper, gpu, cpu, smoke" in r.stderr
    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--address", "http://10.0.0.1", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--address 'http://10.0.0.1' is invalid" in r.stderr and not (tmp_path / "o").exists()
    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", "nosuchfs://bucket/x")
    assert r.returncode == 2 and "'nosuchfs://bucket/x' cannot be opened" in r.stderr and "allowed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    uri = (tmp_path / "u").as_uri()  # a URI on a cluster with the default (driver-local) SQLite tracking
    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", uri, "--address", "127.0.0.1:1")
    assert r.returncode == 2 and "needs an MLflow server" in r.stderr and not (tmp_path / "u").exists()


def _mlflow_children(sweep_dir):
    from mlflow.tracking import MlflowClient

    from sweeps.tracking import resolve_uri

    state = json.loads((sweep_dir / "sweep.json").read_text())
    client = MlflowClient(tracking_uri=resolve_uri(state["uri"], sweep_dir))
    runs = client.search_runs([state["experiment_id"]], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    return client, state, runs


def test_smoke_sweep_completes_with_mlflow_runs(env, tmp_path):
    out = tmp_path / "sweep"
    start = time.time()
    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", str(out), "--num-cpus", "2", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    print(f"smoke sweep wall time {time.time() - start:.1f}s")
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
    assert {p.name for p in out.rglob("*.tmp")} == set()
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
    report = tsweep("report", str(out), "--bootstrap", "100", env=env)
    assert report.returncode == 0, report.stderr
    html = (out / "report" / "report.html").read_text()
    assert (
        "<table" in html
        and html.count("<img") == html.count("data:image/png;base64,") >= 1  # figures inline (their layout: analysis)
        and "| D1 |" in (out / "report" / "report.md").read_text()
    )


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
