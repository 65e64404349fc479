"""The real dashboards, served on loopback, show what the report shows (issue 45): optuna-dashboard's API names the
search's metric and carries each trial's sweep trial, configuration and MLflow run; `mlflow server`'s REST API has
the parent run's parameters, closing metrics, verdict tags and report artifacts, and the child runs' two units."""

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import e2e_env
from tests.helpers import copy_sweep, tsweep

HOST = "127.0.0.1"  # loopback only


def _port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _get(url: str, tries: float = 60.0):
    """JSON (or text) from ``url``, retried while the server starts."""
    until = time.time() + tries
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
            return json.loads(body) if body[:1] in "[{" else body
        except (OSError, ValueError):
            if time.time() > until:
                raise
            time.sleep(0.5)


def _serve(cmd: list, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    import os
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def test_optuna_dashboard_shows_the_metric_and_links_each_trial(smoke_search, tmp_path):
    out, _ = smoke_search
    state = json.loads((out / "sweep.json").read_text())
    port = _port()
    db = tmp_path / "optuna.db"  # a copy: the dashboard may write its own tables
    db.write_bytes((out / "optuna.db").read_bytes())
    exe = Path(sys.executable).with_name("optuna-dashboard")
    proc = _serve([str(exe), f"sqlite:///{db}", "--host", HOST, "--port", str(port)], tmp_path / "dash.log")
    try:
        studies = _get(f"http://{HOST}:{port}/api/studies")["study_summaries"]
        study = next(s for s in studies if s["study_name"] == state["name"])
        detail = _get(f"http://{HOST}:{port}/api/studies/{study['study_id']}")
        assert detail["objective_names"] == [state["metric"]]  # not "Objective 0"
        done = [t for t in detail["trials"] if t["state"] == "Complete"]
        assert done
        for t in done:
            attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
            tid = attrs["trial_id"]
            assert (out / "trials" / tid / "result.json").exists() and attrs["configuration"].startswith("sample-")
            assert attrs["mlflow_run_id"] == (out / "trials" / tid / "mlflow_run_id").read_text().strip()
        csv_text = _get(f"http://{HOST}:{port}/csv/{study['study_id']}")
        assert csv_text.splitlines()[0].startswith(f"Number,State,{state['metric']},")
    finally:
        _stop(proc)


@pytest.mark.slow  # the dashboard command test starts this server; what the parent run holds: test_dashboards_e2e
def test_mlflow_server_shows_the_parent_run_its_report_and_the_childrens_units(smoke_sweep, fixture_data_dir, tmp_path):
    out = copy_sweep(smoke_sweep[0], tmp_path / "copy")
    r = tsweep("report", str(out), "--bootstrap", "20", env=e2e_env(fixture_data_dir))
    assert r.returncode == 0 and "not copied to MLflow" not in r.stdout, r.stdout + r.stderr
    state = json.loads((out / "sweep.json").read_text())
    port = _port()
    exe = Path(sys.executable).with_name("mlflow")
    cmd = [str(exe), "server", "--backend-store-uri", f"sqlite:///{out / 'mlflow.db'}", "--host", HOST,
           "--port", str(port), "--workers", "1"]  # fmt: skip
    proc = _serve(cmd, tmp_path / "mlflow.log")
    api = f"http://{HOST}:{port}/api/2.0/mlflow"
    try:
        run = _get(f"{api}/runs/get?run_id={state['parent_run_id']}", tries=120)["run"]
        params = {p["key"]: p["value"] for p in run["data"]["params"]}
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        assert params["profile"] == "smoke" and params["spec_name"] == state["name"]
        assert tags["commit"] and metrics["trials_finished"] == 4 and metrics["device_hours"] > 0
        claims = (out / "report" / "claims.csv").read_text()
        assert tags["verdict.D-dropout-helps.dev_BLEU"] in claims  # the report's verdict, as a tag
        query = urllib.parse.urlencode({"run_id": state["parent_run_id"], "path": "report"})
        listed = [f["path"] for f in _get(f"{api}/artifacts/list?{query}").get("files", [])]
        assert "report/report.html" in listed and "report/claims.csv" in listed
        child_id = (next((out / "trials").glob("D1-*")) / "mlflow_run_id").read_text().strip()
        child = {p["key"]: p["value"] for p in _get(f"{api}/runs/get?run_id={child_id}")["run"]["data"]["params"]}
        assert child["paper.P_drop"] == "0.0" and child["d_model"] != child["paper.d_model"]  # run vs paper units
    finally:
        _stop(proc)
