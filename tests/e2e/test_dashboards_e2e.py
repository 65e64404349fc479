"""The dashboards agree with the sweep: Optuna's study names its metrics and links each trial to the sweep's trial,
configuration and MLflow run; MLflow's parent run describes the sweep and carries the report and the verdicts;
child runs keep the paper's units apart from the run's (issue 45, item 3).  Reads the session's sweeps."""

import json
import re

import optuna
import pytest
from mlflow.tracking import MlflowClient

from analysis.stats.scale import NOT_MEASURABLE
from tests.e2e.conftest import e2e_env
from tests.helpers import copy_sweep, tsweep


def test_optuna_names_the_metric_and_each_trial_leads_to_the_sweep_and_mlflow(smoke_search):
    out, _ = smoke_search
    state = json.loads((out / "sweep.json").read_text())
    study = optuna.load_study(study_name=state["name"], storage=f"sqlite:///{out / 'optuna.db'}")
    assert study.metric_names == [state["metric"]]
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done
    for t in done:
        tid = t.user_attrs["trial_id"]
        assert (out / "trials" / tid / "result.json").exists() and t.user_attrs["configuration"].startswith("sample-")
        assert t.user_attrs["mlflow_run_id"] == (out / "trials" / tid / "mlflow_run_id").read_text().strip()
    # the winner and the report's importances with their method in the study; the winner as the parent run's tags
    attrs = study.user_attrs
    assert attrs["confirmation.sample"] in {t.user_attrs["configuration"] for t in done}
    assert attrs["confirmation.search_score"] == pytest.approx(study.best_value)
    assert "FanovaImportanceEvaluator(seed=0)" in attrs["importance.fANOVA"]["method"]
    assert set(attrs["importance.fANOVA"]["values"]) <= {"lr_scale", "warmup", "d_model"}
    parent = MlflowClient(f"sqlite:///{out / 'mlflow.db'}").get_run(state["parent_run_id"])
    assert parent.data.tags["search.winner"] == attrs["confirmation.sample"]
    assert parent.data.tags["search.verdict"].startswith("not confirmed")  # the smoke search has no confirm
    assert parent.data.metrics["trials_planned"] == 5 and parent.data.metrics["trials_finished"] == len(done)
    # the log counts against the whole plan and names each sample's knobs when it starts
    log = smoke_search[1].stdout
    counts = [(int(k), int(n)) for k, n in re.findall(r"\[(\d+) of (\d+) trials ended", log)]
    assert counts and {n for _, n in counts} == {5} and [k for k, _ in counts] == sorted(k for k, _ in counts)
    named = re.search(r"sample-[0-9a-f]{8} s1: started \(([^)]*)\)", log)
    assert named and {x.split("=")[0] for x in named.group(1).split(", ")} == {"lr_scale", "warmup", "d_model"}, log
    assert re.search(r"search winner sample-[0-9a-f]{8} \([^)]*lr_scale=[^)]*\): not confirmed", log), log


def test_the_parent_run_describes_the_sweep_and_carries_its_report(smoke_sweep, fixture_data_dir, tmp_path):
    out = copy_sweep(smoke_sweep[0], tmp_path / "copy")
    state = json.loads((out / "sweep.json").read_text())
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    parent = client.get_run(state["parent_run_id"])
    assert parent.data.params["profile"] == "smoke" and parent.data.params["spec_name"] == state["name"]
    assert parent.data.tags["commit"] and parent.data.metrics["trials_finished"] == 4
    assert parent.data.metrics["device_hours"] > 0
    child = client.get_run((next((out / "trials").glob("D1-*")) / "mlflow_run_id").read_text().strip())
    assert child.data.params["paper.P_drop"] == "0.0" and "paper.d_model" in child.data.params
    assert child.data.params["d_model"] != child.data.params["paper.d_model"]  # the run's width, scaled
    r = tsweep("report", str(out), env=e2e_env(fixture_data_dir))
    assert r.returncode == 0 and "not copied to MLflow" not in r.stdout, r.stdout + r.stderr
    parent = client.get_run(state["parent_run_id"])
    judged = ("within noise", "held", "contradicted", "mixed", NOT_MEASURABLE)  # smoke's BLEU may be at its floor
    assert parent.data.tags["verdict.D-dropout-helps.dev_BLEU"] in judged
    assert "report/report.html" in [a.path for a in client.list_artifacts(parent.info.run_id, "report")]
