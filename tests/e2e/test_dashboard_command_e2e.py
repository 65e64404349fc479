"""`tsweep dashboard SWEEP` over loopback (issue 53): on a small search sweep built without Ray (the search-record
test's sweep: real trial records, a real Optuna study and a real MLflow store, both SQLite), the command starts
the real MLflow UI and the real optuna-dashboard on 127.0.0.1, prints their URLs, both answer HTTP 200 and show
the sweep, and SIGINT stops both servers and everything they started."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.helpers import ROOT
from tests.sweeps.test_search_record import sweep  # noqa: F401 - the fixture: a search sweep on disk

URL = re.compile(r"^(MLflow UI|optuna-dashboard): (http://127\.0\.0\.1:\d+)  \(")


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def test_dashboard_serves_mlflow_and_optuna_on_loopback_and_sigint_stops_both(sweep, tmp_path):  # noqa: F811
    spec, root, state, tracking = sweep
    log = (tmp_path / "dashboard.out").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "sweeps.cli", "dashboard", str(root)], stdout=log,
                            stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)  # fmt: skip
    try:
        urls: dict[str, str] = {}
        until = time.time() + 60
        while len(urls) < 2 and time.time() < until and proc.poll() is None:
            log.seek(0)
            urls = {m[1]: m[2] for m in map(URL.match, log.read().splitlines()) if m}
            time.sleep(0.25)
        log.seek(0)
        printed = log.read()
        assert set(urls) == {"MLflow UI", "optuna-dashboard"}, printed
        assert "Ctrl-C stops MLflow UI and optuna-dashboard" in printed
        servers = _children(proc.pid)
        assert len(servers) == 2, printed
        # both answer 200 on loopback, and serve this sweep
        assert _get(urls["MLflow UI"])[0] == 200
        api = f"{urls['MLflow UI']}/api/2.0/mlflow"
        status, body = _get(f"{api}/runs/get?run_id={tracking['parent_run_id']}")
        assert status == 200 and json.loads(body)["run"]["info"]["run_id"] == tracking["parent_run_id"]
        assert _get(urls["optuna-dashboard"])[0] == 200
        status, body = _get(f"{urls['optuna-dashboard']}/api/studies")
        assert status == 200 and [s["study_name"] for s in json.loads(body)["study_summaries"]] == ["recorded"]
        workers = [w for s in servers for w in _children(s)]  # MLflow's uvicorn worker
        assert workers, printed
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        log.seek(0)
        assert log.read().rstrip().endswith("SIGINT: stopping MLflow UI and optuna-dashboard")
        until = time.time() + 10
        while any(map(_alive, servers + workers)) and time.time() < until:
            time.sleep(0.2)
        assert not any(map(_alive, servers + workers))
        for url in urls.values():
            try:
                _get(url)
            except OSError:
                continue
            raise AssertionError(f"{url} still answers")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
