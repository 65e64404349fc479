"""`tsweep dashboard`'s refusals (one line, exit 2, nothing started) and its watch: a server that exits by itself
stops the other, with one line naming it (real child processes; the loopback test with MLflow and optuna-dashboard
is tests/e2e/test_dashboard_command_e2e.py)."""

import io
import json
import sys

from sweeps.cli.dashboard import HOST, Server, free_port, serve, servers
from tests.analysis.test_analysis import make_sweep
from tests.helpers import refused


def test_a_directory_that_is_not_a_sweep_is_one_line(tmp_path, capsys):
    refused(["dashboard", tmp_path], capsys, "is not a sweep directory (no sweep.json)")


def test_a_sweep_at_a_uri_is_one_line(capsys):
    refused(["dashboard", "s3://bucket/sweeps/x"], capsys, "is a URI", "serves a sweep directory on this machine")


def _ablation(tmp_path, uri: str):
    """The synthetic ablation sweep of tests/analysis, its sweep.json naming the MLflow store ``uri``."""
    root = make_sweep(tmp_path / "sweep")
    state = json.loads((root / "sweep.json").read_text())
    (root / "sweep.json").write_text(json.dumps({**state, "plan": {}, "uri": uri}))
    return root


def test_a_store_at_a_remote_uri_is_one_line(tmp_path, capsys):
    root = _ablation(tmp_path, "http://127.0.0.1:5000")
    refused(["dashboard", root], capsys, "tracks in MLflow at http://127.0.0.1:5000", "that tracking server's own UI")


def test_a_sweep_without_its_store_is_one_line(tmp_path, capsys):
    root = _ablation(tmp_path, "mlflow.db")
    (root / "mlflow.db").unlink(missing_ok=True)
    refused(["dashboard", root], capsys, f"its MLflow store {root.resolve() / 'mlflow.db'} does not exist")


def test_an_ablation_sweep_gets_mlflow_alone_on_loopback(tmp_path):
    root = _ablation(tmp_path, "mlflow.db")
    (root / "mlflow.db").touch()
    (found,) = servers(str(root))
    assert found.name == "MLflow UI" and found.url.startswith(f"http://{HOST}:")
    assert found.argv[found.argv.index("--host") + 1] == HOST
    assert found.argv[found.argv.index("--backend-store-uri") + 1] == f"sqlite:///{root.resolve() / 'mlflow.db'}"


def test_a_server_that_exits_stops_the_other_in_one_line(tmp_path):
    port = free_port()
    web = Server("web", [sys.executable, "-m", "http.server", "--bind", HOST, str(port)], f"http://{HOST}:{port}",
                 "a folder")  # fmt: skip
    dies = Server("dying", [sys.executable, "-c", "import time, sys; time.sleep(1.5); print('gone'); sys.exit(3)"],
                  f"http://{HOST}:{free_port()}", "nothing")  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    assert serve([web, dies], out, err) == 1
    assert err.getvalue() == "tsweep dashboard: dying exited with code 3 (gone); stopping web\n"
    assert web.proc is not None and web.proc.poll() is not None  # the other server stopped
    assert f"web: http://{HOST}:{port}" in out.getvalue()
