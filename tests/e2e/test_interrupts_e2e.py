"""A real sweep stopped before every trial has a result (SIGTERM, two SIGINTs in a row) never reads "done": one
line, exit 130 (SIGINT) or 143 (SIGTERM), sweep.json and the MLflow parent say interrupted, and --resume trains every
trial without a result."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT


@pytest.fixture
def env(fixture_corpus, fixture_data_dir):
    return dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
                OMP_NUM_THREADS="1")  # fmt: skip


def _spec(path: Path, adaptive: bool = False) -> Path:
    """A base-only spec at the smoke profile; adaptive seeds need claims: the paper's (not measured on base alone)."""
    doc = {"name": "stop", "corpus": {"name": "bible-en-de"}, "seeds": {"min": 3, "max": 3} if adaptive else [1, 2, 3],
           "max_concurrent": 2, "train": {"steps": 200, "eval_every": 10},
           **({"claims": "table3"} if adaptive else {})}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(spec: Path, out: Path, env, *extra) -> list[str]:
    return [sys.executable, "-m", "sweeps.cli", "run", str(spec), "--profile", "smoke", "--out", str(out),
            "--num-cpus", "2", *extra]  # fmt: skip


def _twice(pid):
    """Ctrl-C twice in a terminal: the whole foreground group, 0.3 s apart."""
    os.killpg(pid, signal.SIGINT)
    time.sleep(0.3)
    os.killpg(pid, signal.SIGINT)


def _stop(cmd, out: Path, env, send, ready=None) -> subprocess.CompletedProcess:
    """Start the driver, wait until ``ready()`` (default: a first checkpoint), ``send(pid)`` the signals, wait
    for the driver."""
    ready = ready or (lambda: list(out.glob("trials/*/checkpoints/step-*.pt")))
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not ready():
            time.sleep(0.3)
        send(proc.pid)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _ended_as_interrupted(r, out: Path, code: int) -> None:
    from mlflow.tracking import MlflowClient

    from sweeps.run.tracking import resolve_uri

    assert r.returncode == code, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: "), r.stderr[-3000:]
    assert "--resume" in lines[0] and f"messages: {out / 'driver.log'}" in lines[0]
    assert "SIGTERM received" not in r.stderr and "Traceback" not in r.stderr and " done in " not in r.stdout
    state = json.loads((out / "sweep.json").read_text())
    assert state["status"] == "interrupted"
    client = MlflowClient(resolve_uri(state["uri"], out))
    assert client.get_run(state["parent_run_id"]).info.status == "KILLED"
    status = subprocess.run([sys.executable, "-m", "sweeps.cli", "status", str(out)], capture_output=True, text=True,
                            cwd=ROOT).stdout  # fmt: skip
    assert "stopped early" not in status and "finished" not in status.splitlines()[-1], status


@pytest.mark.e2e
@pytest.mark.slow  # longest sweeps; make test-slow runs them
def test_sigterm_ends_the_sweep_as_interrupted_with_143_and_resume_trains_the_rest(tmp_path, env):
    spec, out = _spec(tmp_path / "stop.yaml"), tmp_path / "sweep"
    r = _stop(_run(spec, out, env), out, env, lambda pid: os.kill(pid, signal.SIGTERM))  # the driver only
    _ended_as_interrupted(r, out, 143)
    r = subprocess.run(_run(spec, out, env, "--resume"), env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0 and "3 finished" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stderr.strip() == "", r.stderr[-3000:]  # Ray's and MLflow's messages went to driver.log


@pytest.mark.e2e
@pytest.mark.slow  # the Ctrl-C test of test_faults_e2e stops an adaptive sweep with one SIGINT
def test_two_sigints_in_a_row_end_the_sweep_as_interrupted_with_130(tmp_path, env):
    """An adaptive sweep (seeds min/max) here: it also records the stop as the signal's, with what finished."""
    spec, out = _spec(tmp_path / "stop.yaml", adaptive=True), tmp_path / "sweep"
    _ended_as_interrupted(_stop(_run(spec, out, env), out, env, _twice), out, 130)
    ad = json.loads((out / "sweep.json").read_text())["adaptive"]
    assert ad["stop"] == "interrupted", ad
    assert ad["stopped"].startswith("interrupted by SIGINT during the minimum seeds: "), ad["stopped"]
    assert "of 3 trials finished; --resume goes on" in ad["stopped"]


@pytest.mark.e2e
@pytest.mark.slow  # two sessions; the default suite checks the interrupted record in test_faults_e2e's Ctrl-C test
def test_a_resume_stopped_by_hand_replaces_the_earlier_sessions_stop_record(tmp_path, env):
    """Adaptive seeds: a first session spent its budget (its record: the claims it did not reach); the resume,
    stopped by two SIGINTs, writes its own record instead (interrupted, what finished, what is still open), and
    the report's header says so and charges the one look taken."""
    doc = {"name": "open", "corpus": {"name": "bible-en-de"}, "seeds": {"min": 2, "max": 3}, "max_concurrent": 2,
           "train": {"steps": 200, "eval_every": 10}, "rows": {"D": [{"label": "D3", "eps_ls": 0.0}]},
           "claims": "table3"}  # fmt: skip
    spec, out = tmp_path / "open.yaml", tmp_path / "sweep"
    spec.write_text(yaml.safe_dump(doc))
    r = subprocess.run(_run(spec, out, env, "--budget", "1s"), env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    first = json.loads((out / "sweep.json").read_text())["adaptive"]
    assert first["stop"] == "budget_spent" and first["stopped"].startswith("wall-clock budget"), r.stderr[-3000:]
    assert "D-ls-hurts-ppl" in first["unreached"]

    resumed = time.time()

    def started_again():  # a trial attempt begun by the resume
        attempts = (line for path in out.glob("trials/*/attempts.jsonl") for line in path.read_text().splitlines())
        return any(json.loads(line)["time"] > resumed for line in attempts)

    r = _stop(_run(spec, out, env, "--resume", "--budget", "1h"), out, env, _twice, ready=started_again)
    assert r.returncode == 130, r.stderr[-3000:]
    ad = json.loads((out / "sweep.json").read_text())["adaptive"]
    assert ad["stop"] == "interrupted", ad
    assert ad["stopped"].startswith("interrupted by SIGINT during the minimum seeds: "), ad["stopped"]
    assert "wall-clock budget" not in ad["stopped"] and "--resume goes on" in ad["stopped"]
    assert ad["spent_seconds"] > first["spent_seconds"]

    from analysis.report.writers import write_report

    md = (write_report(out, samples=20) / "report.md").read_text()
    assert "stopped: interrupted by SIGINT during the minimum seeds" in md and "Looks charged: 1 " in md
    assert "recorded by an earlier session" not in md
