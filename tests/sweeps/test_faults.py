"""Faults and hostile input on the sweeps side: a second driver, paths outside the sweep, a full disk at the start,
unreadable state (faults during a real sweep: tests/e2e/test_faults_e2e.py)."""

import json
import logging
import os
import socket
import subprocess
from pathlib import Path

import pytest

from sweeps.state.lock import SweepLock
from tests.helpers import SMOKE, dead_pid, one_line, refused, tsweep, write_spec
from transformer_core.errors import UserError

ALLOWED = "allowed letters, digits, '_', '.', '-' (not starting with '.')"


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# paths (item 7) ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc,field,value",
    [
        ({"rows": {"A": [{"label": "../x", "h": 2}]}}, "rows.A[0].label", "../x"),
        ({"rows": {"A": [{"label": "/tmp/abs", "h": 2}]}}, "rows.A[0].label", "/tmp/abs"),
        ({"rows": {"A": [{"label": ".hidden", "h": 2}]}}, "rows.A[0].label", ".hidden"),
        ({"name": "../../up"}, "name", "../../up"),
    ],
    ids=["dotdot-label", "absolute-label", "hidden-label", "dotdot-name"],
)
def test_labels_and_names_that_would_leave_the_sweep_are_refused(tmp_path, doc, field, value):
    spec = write_spec(tmp_path / "s.yaml", **doc)
    out = tmp_path / "work" / "out"
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out))
    assert one_line(r).endswith(f"{field}: {value!r} is invalid; {ALLOWED}")
    assert tree(tmp_path) == ["s.yaml"] and not list(Path("/tmp").glob("abs-s1-*"))


def test_out_must_be_new_empty_or_a_sweep_of_this_spec(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "sweep.json").write_text(json.dumps({"name": "other", "plan": {}}))
    before, root_before = tree(tmp_path), sorted(os.listdir("/"))
    cases = {
        str(tmp_path / "file"): "is an existing file",
        "/": "is the filesystem root",
        str(tmp_path / "notes"): "is a non-empty directory that holds no sweep",
        str(tmp_path / "other"): "holds sweep 'other', not 'smoke'",
        str(tmp_path / "file" / "sub"): "cannot create the sweep directory",
    }
    for out, message in cases.items():
        refused(["run", SMOKE, "--profile", "smoke", "--out", out], capsys, message)
    assert tree(tmp_path) == before and sorted(os.listdir("/")) == root_before


def test_a_sweep_planned_under_other_profile_rules_is_not_resumed(tmp_path):
    """A profile recalibrated since a sweep was planned (cpu: 600 x 2,048 -> 2,400 x 512): resuming would
    measure the old trials and the new ones at two budgets; one line names what changed, nothing is written."""
    from analysis.data.sweep_record import parse_record
    from sweeps.spec.profiles import get_profile
    from sweeps.state.sweep_state import check_state

    now = get_profile("cpu").rules()
    then = {**get_profile("cpu-2048").rules(), "profile": "cpu"}  # the cpu profile as it was before
    state = {"name": "table3", "profile": "cpu", "profile_rules": then}
    with pytest.raises(UserError) as err:
        check_state(parse_record(state, "w"), "table3", "cpu", True, "sweep_runs/table3-cpu", now)
    message = str(err.value)
    assert "\n" not in message and "profile 'cpu' as it was then" in message and "give another --out" in message
    assert "steps_factor 0.006 -> 0.024" in message and "train.tokens_per_batch 2048 -> 512" in message
    same = {"name": "table3", "profile": "cpu", "profile_rules": json.loads(json.dumps(now))}  # as sweep.json has it
    assert check_state(parse_record(same, "w"), "table3", "cpu", True, "w", now) is same
    older = parse_record({"name": "table3", "profile": "cpu"}, "w")  # a sweep.json from before profile_rules
    assert check_state(older, "table3", "cpu", True, "w", now)
    # what does not change a trial: threads, an exclusion's wording, 800.0 for 800, a key added to the profile
    # later at its default (cpu-2048 planned before beam_stop existed, resumed once its rules say exact)
    other = json.loads(json.dumps(now))
    other["train"] = {**other["train"], "threads": 2, "eval_every": 800.0}
    other["exclude"] = {"big": "reworded"}
    assert check_state(parse_record(same, "w"), "table3", "cpu", True, "w", other) is same
    old = {**get_profile("cpu-2048").rules()}
    later = {**old, "train": {**old["train"], "beam_stop": "exact"}}
    planned = {"name": "table3", "profile": "cpu-2048", "profile_rules": json.loads(json.dumps(old))}
    assert check_state(parse_record(planned, "w"), "table3", "cpu-2048", True, "w", later) is planned


def test_trial_workdirs_must_resolve_inside_the_sweep(tmp_path):
    from sweeps.run.trial import trial_workdir

    sweep = tmp_path / "sweep"
    (sweep / "trials").mkdir(parents=True)
    assert trial_workdir(sweep, "base-s1-abc") == (sweep / "trials" / "base-s1-abc").resolve()
    with pytest.raises(UserError, match="invalid"):
        trial_workdir(sweep, "../../x")
    (tmp_path / "elsewhere").mkdir()
    (sweep / "trials" / "evil").symlink_to(tmp_path / "elsewhere")  # a planted link out of the sweep
    with pytest.raises(UserError, match="resolves outside the sweep directory"):
        trial_workdir(sweep, "evil")


# the lock (item 2) ---------------------------------------------------------------------------------------------


def test_a_second_driver_is_refused_while_the_lock_is_held(tmp_path):
    out = tmp_path / "sweep"
    lock = SweepLock.acquire(str(out), out)
    try:
        r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", str(out))
        line = one_line(r)
        assert f"sweep {out} is being run by pid {os.getpid()} on {socket.gethostname()} since 20" in line
        assert tree(out) == ["sweep.lock"]  # the second driver wrote nothing
        body = json.loads((out / "sweep.lock").read_text())
        assert body["pid"] == os.getpid() and body["host"] == socket.gethostname()
    finally:
        lock.release()
    assert (out / "sweep.lock").read_text() == ""
    again = SweepLock.acquire(str(out), out)  # released: the next driver takes it without a warning
    again.release()


def test_a_stale_lock_of_a_dead_driver_is_taken_over_with_a_warning(tmp_path, caplog):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.lock").write_text(json.dumps({"pid": dead_pid(), "host": socket.gethostname(), "time": 1.0}))
    with caplog.at_level(logging.WARNING, logger="sweeps.state.lock"):
        lock = SweepLock.acquire(str(out), out)
    try:
        assert "taking over the stale lock" in caplog.text and "no longer running" in caplog.text
        assert json.loads((out / "sweep.lock").read_text())["pid"] == os.getpid()
    finally:
        lock.release()
    (out / "sweep.lock").write_text(json.dumps({"pid": 1, "host": "another-host", "time": 1.0}))
    with pytest.raises(UserError, match="being run by pid 1 on another-host .*delete"):
        SweepLock.acquire(str(out), out)  # another host's driver: flock may not reach it, the body decides


def test_a_uri_sweep_is_locked_by_an_object(tmp_path):
    from sweeps.state.storage import Storage

    store = Storage((tmp_path / "remote").as_uri())
    lock = SweepLock.acquire(store.uri, store=store)
    with pytest.raises(UserError, match=f"being run by pid {os.getpid()}"):
        SweepLock.acquire(store.uri, store=store)
    lock.release()
    assert not (tmp_path / "remote" / "sweep.lock").exists()
    store.write_text("sweep.lock", json.dumps({"pid": dead_pid(), "host": socket.gethostname(), "time": 1.0}))
    SweepLock.acquire(store.uri, store=store).release()  # stale: taken over


# state files (items 1 and 12) ----------------------------------------------------------------------------------


def test_an_unreadable_sweep_json_is_one_line_for_resume_and_status(tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text('{"name": "smoke", "pla')  # truncated by a full disk
    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", str(out), "--resume")
    assert f"sweep.json in {out} is unreadable: " in one_line(r) and tree(out) == ["sweep.json"]
    r = tsweep("status", str(out))
    assert f"sweep.json in {out} is unreadable: " in one_line(r)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs (needs root); skipped where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if r.returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_at_the_start_is_one_line_and_leaves_out_as_it_was(tiny_disk):
    out = tiny_disk / "sweep"
    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", str(out))
    line = one_line(r)
    assert f"no space left on the device of {out}" in line and "run it again" in line
    assert not out.exists()  # the lock and the half-made MLflow store are removed


def test_a_full_disk_is_found_by_a_probe_when_the_error_does_not_name_it(tmp_path):
    """Tune can die of an EOFError reading a trial's error file that a full disk left empty: the CLI then
    probes the sweep's device (a real 256 KiB tmpfs here) and still says 'no space' in one line."""
    from sweeps.state.diskfull import disk_full_at

    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        assert not disk_full_at(disk / "sweep")  # a path not made yet: its nearest existing parent is probed
        ballast = disk / "ballast"
        with open(ballast, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        assert disk_full_at(disk / "sweep") and not list(disk.glob(".space-probe-*"))
        ballast.unlink()
        assert not disk_full_at(disk)
    finally:
        subprocess.run(["umount", str(disk)])


def test_paths_in_sweep_json_are_relative_to_the_sweep(tmp_path):
    from sweeps.run.tracking import default_uri, resolve_uri, stored_uri

    a, b = tmp_path / "a", tmp_path / "copy-of-a"
    assert stored_uri(default_uri(a), a) == "mlflow.db"
    assert resolve_uri("mlflow.db", b) == default_uri(b)  # a copied sweep writes into its own database
    assert resolve_uri("http://mlflow:5000", b) == stored_uri("http://mlflow:5000", a) == "http://mlflow:5000"


def test_a_finished_trial_dispatched_again_leaves_its_mlflow_run_ended(tmp_path):
    from mlflow.tracking import MlflowClient

    from sweeps.run.tracking import MlflowTracker, default_uri, ensure_parent_run
    from sweeps.run.trial import run_trial, trial_workdir
    from sweeps.spec.sweep_spec import load_spec, plan

    trial = plan(load_spec(SMOKE), "smoke")[0]
    uri = default_uri(tmp_path)
    exp, parent = ensure_parent_run(uri, "x", "x", {}, artifact_location=(tmp_path / "mlartifacts").as_uri())
    workdir = trial_workdir(tmp_path, trial.trial_id)
    tracker = MlflowTracker(uri, exp, parent, workdir, trial.trial_id, {})
    tracker.set_status("FINISHED")
    done = {"status": "finished", "config_hash": trial.config_hash, "dev_bleu": 1.0}
    (workdir / "result.json").write_text(json.dumps(done))
    payload = trial.record(tmp_path, {"uri": uri, "experiment_id": exp, "parent_run_id": parent}, "base")
    assert run_trial(payload) == done
    assert MlflowClient(uri).get_run(tracker.run_id).info.status == "FINISHED"
    assert not (workdir / "sessions.jsonl").exists()  # not started again


# --set: one parser for every command's KEY=VALUE pairs ----------------------------------------------------


def test_set_takes_several_pairs_or_repeated_flags():
    from sweeps.cli import build_parser
    from transformer_core.run_config import parse_assignments

    parser = build_parser()
    several = parser.parse_args(["train", "--workdir", "w", "--set", "N=2", "d_model=128", "--quiet"])
    repeated = parser.parse_args(["train", "--workdir", "w", "--set", "N=2", "--set", "d_model=128"])
    mixed = parser.parse_args(["train", "--set", "N=2", "--workdir", "w", "--set", "d_model=128"])
    expected = {"N": "2", "d_model": "128"}
    assert parse_assignments(several.set) == parse_assignments(repeated.set) == parse_assignments(mixed.set) == expected
    assert several.quiet
