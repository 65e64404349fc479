"""MLflow 3 sends usage telemetry to a host on the internet unless MLFLOW_DISABLE_TELEMETRY (or DO_NOT_TRACK) is
"true"; tsweep talks to 127.0.0.0/8 only, so importing its tracking module turns that off for the process and what
it starts.  (MLFLOW_ENABLE_TELEMETRY=false, which this project set before, is read by no MLflow 3 code.)"""

import os
import subprocess
import sys

from tests.helpers import ROOT

# what mlflow.telemetry.utils takes for a CI machine or a test run (telemetry off without being told)
_CI = ("PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CI", "CIRCLECI", "GITLAB_CI", "JENKINS_URL", "TRAVIS", "TF_BUILD",
       "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION", "CLOUD_RUN_EXECUTION",
       "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID")  # fmt: skip


def _telemetry_disabled(first_import: str, home) -> str:
    """MLflow's own answer to "is telemetry off?" in a fresh process on a user's machine, after ``first_import``
    (MLflow on with telemetry writes an installation id under the home's config: ``home`` stands in for it)."""
    env = {k: v for k, v in os.environ.items() if k not in (*_CI, "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    code = (f"import {first_import}\nfrom mlflow.telemetry import utils\n"
            "assert not utils._is_ci_env_or_testing()\nprint(utils.is_telemetry_disabled())")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_mlflow_telemetry_is_off_once_tsweep_tracks_and_on_without_it(tmp_path):
    assert _telemetry_disabled("mlflow", tmp_path) == "False"  # the control: MLflow alone would send
    assert _telemetry_disabled("sweeps.run.tracking", tmp_path) == "True"


def test_the_dashboards_mlflow_server_runs_with_telemetry_off(tmp_path):
    from sweeps.cli.dashboard import servers
    from tests.sweeps.test_dashboard import _ablation

    root = _ablation(tmp_path, "mlflow.db")
    (root / "mlflow.db").touch()
    (found,) = servers(str(root))
    assert found.env["MLFLOW_DISABLE_TELEMETRY"] == "true"
