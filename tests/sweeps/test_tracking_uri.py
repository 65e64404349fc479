"""A spec's ``tracking.uri`` of ``sqlite:///`` with a relative path (issue 53): MLflow opened it from each process's
own directory, so the trials wrote empty stores inside the sweep; plan and run refuse it in one line, naming the
absolute form, and an absolute path plans."""

from pathlib import Path

from sweeps.cli import main
from tests.helpers import refused, write_spec


def test_a_relative_sqlite_path_is_refused_in_one_line(tmp_path, capsys):
    spec = write_spec(tmp_path / "rel.yaml", tracking={"uri": "sqlite:///runs/mlflow.db"})
    err = refused(["plan", spec, "--profile", "smoke"], capsys, "tracking.uri: 'sqlite:///runs/mlflow.db' names a "
                  "relative path", "four slashes", "no tracking.uri for the sweep's own mlflow.db")  # fmt: skip
    assert f"sqlite:///{Path('runs/mlflow.db').absolute()}" in err
    refused(["run", spec, "--profile", "smoke", "--out", tmp_path / "out"], capsys, "names a relative path")
    assert not (tmp_path / "out").exists()


def test_an_absolute_sqlite_path_plans(tmp_path, capsys):
    spec = write_spec(tmp_path / "abs.yaml", tracking={"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    assert main(["plan", str(spec), "--profile", "smoke"]) == 0
