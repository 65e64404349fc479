"""A language-model smoke sweep through Ray into MLflow, and its report without BLEU."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT
from tests.sweeps.test_lm_sweeps import _check_lm_report, _lm_spec


@pytest.mark.slow  # a real Ray sweep: about a minute on 2 cores
def test_lm_smoke_sweep_into_mlflow_and_a_report_without_bleu(tmp_path, fixture_corpus, fixture_data_dir):
    from mlflow.tracking import MlflowClient

    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    out, start = tmp_path / "sweep", time.time()
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(_lm_spec(tmp_path / "lm.yaml")), "--profile", "smoke"]
    r = subprocess.run([*cmd, "--out", str(out), "--num-cpus", "2"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    print(f"lm smoke sweep wall time {time.time() - start:.1f}s")
    state = json.loads((out / "sweep.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    runs = client.search_runs([state["experiment_id"]], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    assert len(runs) == 6 and {x.info.status for x in runs} == {"FINISHED"}
    for run in runs:
        assert {"dev_ppl", "dev_bpb", "test_ppl", "test_bpb", "loss"} <= set(run.data.metrics)
        assert "dev_bleu" not in run.data.metrics and run.data.params["task"] == "lm"
        assert {"result.json", "samples.txt"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    r = subprocess.run(
        [sys.executable, "-m", "sweeps.cli", "report", str(out)], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    _check_lm_report(out / "report")
