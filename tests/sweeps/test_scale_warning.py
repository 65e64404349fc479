"""A test profile (profiles.yaml ``purpose: test``) says so in the run's log before anything runs, and in the MLflow
parent run's description, beside the spec's title and description."""

from mlflow.tracking import MlflowClient

from sweeps.cli import main
from sweeps.run.runner import parent_description
from sweeps.run.tracking import describe_parent, ensure_parent_run
from sweeps.spec.profiles import scale_warning
from sweeps.spec.sweep_spec import load_spec
from tests.helpers import SMOKE, write_spec


def test_a_run_at_the_smoke_profile_says_it_is_a_test_before_anything_runs(capsys):
    rc = main(["run", str(SMOKE), "--profile", "smoke", "--address", "not an address"])
    out, err = capsys.readouterr()
    assert rc == 2 and "--address" in err  # refused after the warning: nothing ran
    assert "Test profile: smoke is a profile for testing the pipeline" in out
    assert scale_warning("cpu") is None


def test_the_parent_run_describes_the_study_and_warns_at_a_test_profile(tmp_path):
    spec = load_spec(write_spec(tmp_path / "own.yaml", title="Norm placement", description="Pre- against post-norm",
                                rows={"N": [{"label": "pre", "norm": "pre"}]}))  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _, run_id = ensure_parent_run(uri, "own", "own", {"profile": "smoke"})
    describe_parent(uri, run_id, {}, parent_description(spec, "smoke"))
    tags = MlflowClient(uri).get_run(run_id).data.tags
    note = tags["mlflow.note.content"]
    assert note.startswith("**Test profile: smoke is a profile for testing")
    assert "# Norm placement" in note and "Pre- against post-norm" in note and tags["profile_purpose"] == "test"
    cpu = parent_description(spec, "cpu")
    assert (
        cpu["mlflow.note.content"] == "# Norm placement\n\nPre- against post-norm"
        and cpu["profile_purpose"] == "results"
    )
