"""A spec of one's own, judged like Table 3 (issue 45): its claim stated in the spec, recorded in sweep.json when
the sweep starts, judged in the report (title and description from the spec, no paper columns, none of the paper's
claims) and tagged on the MLflow parent run; a changed claim on resume is named in the report."""

import csv
import json

import yaml
from mlflow.tracking import MlflowClient

from tests.e2e.conftest import e2e_env
from tests.helpers import tsweep

SPEC = {
    "name": "pdrop", "title": "Dropout ablation", "description": "Is dropout needed at this budget?",
    "corpus": {"name": "bible-en-de"}, "seeds": [1, 2], "max_concurrent": 2,
    "rows": {"P": [{"label": "P0", "P_drop": 0.0}]},
    "claims": [{"id": "nodrop-worse", "text": "No dropout is worse than 0.1 on dev cross-entropy",
                "compare": "P0 < base", "readings": ["dev_ce"]}],
}  # fmt: skip


def test_a_users_claim_is_judged_and_shapes_the_report(fixture_corpus, fixture_data_dir, tmp_path):
    env = e2e_env(fixture_data_dir)
    spec, out = tmp_path / "pdrop.yaml", tmp_path / "sweep"
    spec.write_text(yaml.safe_dump(SPEC))
    r = tsweep("run", spec, "--profile", "smoke", "--out", out, "--num-cpus", "2", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    state = json.loads((out / "sweep.json").read_text())
    assert [c["id"] for c in state["report"]["claims"]] == ["nodrop-worse"] and state["report"]["paper"] == {}
    r = tsweep("report", out, "--bootstrap", "20", env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    md = (out / "report" / "report.md").read_text()
    assert md.startswith("# Dropout ablation: pdrop\n\nIs dropout needed at this budget?\n")
    assert "## Claims, judged on these results" in md and "(paper)" not in md and "A-one-head" not in md
    assert "**Test profile**: smoke is a profile for testing the pipeline" in md  # the scale guard, at smoke
    claims = list(csv.DictReader((out / "report" / "claims.csv").open()))
    assert [(c["claim"], c["reading"]) for c in claims] == [("nodrop-worse", "dev cross-entropy (nats, ln PPL)")]
    assert claims[0]["verdict"] in ("held", "contradicted", "within noise")
    parent = MlflowClient(f"sqlite:///{out / 'mlflow.db'}").get_run(state["parent_run_id"])
    assert parent.data.tags["verdict.nodrop-worse.dev_cross-entropy"] == claims[0]["verdict"]

    # the claim changed after results were seen: allowed, and the report says so
    changed = {**SPEC, "claims": [{**SPEC["claims"][0], "readings": ["dev_ce", "dev_bleu"]}]}
    spec.write_text(yaml.safe_dump(changed))
    r = tsweep("run", spec, "--profile", "smoke", "--out", out, "--resume", "--num-cpus", "2", env=env)
    assert r.returncode == 0 and "claims changed since the sweep started (nodrop-worse)" in r.stdout, r.stdout
    assert tsweep("report", out, "--bootstrap", "20", env=env).returncode == 0
    md = (out / "report" / "report.md").read_text()
    assert "**Claims amended**: nodrop-worse changed after the sweep started, with 4 trials finished" in md
