"""The sweep's lock file is never followed out of the sweep (a second, hostile read of issue 43): a sweep.lock
planted as a link to another file is refused in one line, and that file keeps its bytes."""

import os

import pytest

from sweeps.state.lock import SweepLock
from transformer_core.errors import UserError


def test_a_lock_planted_as_a_link_is_refused_and_its_target_left_alone(tmp_path):
    victim = tmp_path / "other-sweep" / "sweep.json"
    victim.parent.mkdir()
    victim.write_text('{"name": "other"}')
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.lock").symlink_to(victim)
    with pytest.raises(UserError, match="cannot open the lock"):
        SweepLock.acquire(str(sweep), sweep)
    assert victim.read_text() == '{"name": "other"}'


def test_a_lock_that_is_not_a_regular_file_is_refused(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    os.mkfifo(sweep / "sweep.lock")
    with pytest.raises(UserError, match="not a regular file"):
        SweepLock.acquire(str(sweep), sweep)
    (sweep / "sweep.lock").unlink()
    SweepLock.acquire(str(sweep), sweep).release()  # a regular lock file is taken


def _driver_log(sweep):
    from sweeps.run.driverlog import DriverLog

    log = DriverLog().start()
    os.write(2, b"ray says something\n")
    return log.stop(sweep)


def test_a_driver_log_planted_as_a_link_is_not_written_through(tmp_path):
    """`tsweep run` appended Ray's messages to SWEEP/driver.log through a link (to ~/.bashrc, say)."""
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=/usr/bin\n")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    (sweep / "driver.log").symlink_to(victim)
    where = _driver_log(sweep)
    assert victim.read_text() == "export PATH=/usr/bin\n"
    assert where != sweep / "driver.log" and "ray says something" in where.read_text()
    where.unlink()
    (sweep / "driver.log").unlink()
    assert _driver_log(sweep) == sweep / "driver.log"  # a sweep's own file: appended
    assert "ray says something" in (sweep / "driver.log").read_text()


@pytest.mark.parametrize("name", ["optuna.db", "mlflow.db", "tune_summary.json", "driver.log"])
def test_a_sweeps_own_file_planted_as_a_link_is_refused_before_anything_runs(tmp_path, name):
    """optuna.db linked to another sweep's study of the same name: a resume would have sampled into that one."""
    import json

    from tests.helpers import one_line, tsweep

    other = tmp_path / "other" / name
    other.parent.mkdir()
    other.write_bytes(b"another sweep's file")
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"name": "s", "profile": "smoke", "plan": {}, "trials": []}))
    (out / name).symlink_to(other)
    spec = tmp_path / "spec.yaml"
    space = {"lr_scale": {"type": "loguniform", "low": 0.1, "high": 1.0}}
    spec.write_text(json.dumps({"name": "s", "search": {"samples": 2, "space": space}}))
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--resume", "--num-cpus", "1")
    assert f"{name} is a link" in one_line(r)
    assert other.read_bytes() == b"another sweep's file"


def test_a_sweeps_own_file_planted_as_a_fifo_is_refused_before_anything_runs(tmp_path):
    """tune_summary.json as a FIFO: `tsweep run --resume` waited for ever reading it."""
    import json

    from tests.helpers import one_line, tsweep

    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"name": "t", "profile": "smoke", "plan": {}, "trials": []}))
    os.mkfifo(out / "tune_summary.json")
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "t"}))
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--resume", "--num-cpus", "1", timeout=120)
    assert "tune_summary.json is not a regular file" in one_line(r)
