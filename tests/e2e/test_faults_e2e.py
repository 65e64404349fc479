"""Faults during a real sweep: a disk that fills mid-run, Ctrl-C, and Ray's listeners on loopback only."""

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, SMOKE, dead_pid, one_line, tsweep, write_spec


@pytest.mark.slow
def test_a_disk_that_fills_mid_sweep_ends_in_one_line_and_resume_completes_the_table(fixture_corpus, tmp_path):
    """Item 1 end to end: trials hit ENOSPC at their checkpoints (3-6 min with Ray's retries), the
    sweep ends in one line; after the disk grows, --resume finishes every trial with nothing left truncated."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2500k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        out = disk / "sweep"
        run = ["run", str(SMOKE), "--profile", "smoke", "--out", str(out), "--num-cpus", "2"]
        r = tsweep(*run)
        line = next(x for x in r.stderr.splitlines() if x.startswith("tsweep run: error:"))
        assert r.returncode == 2 and f"no space left on the device of {out}" in line and "--resume" in line
        assert "Traceback" not in r.stderr, r.stderr[-3000:]  # Ray's loggers too: one line, no tracebacks
        ours = [
            "sweep.json",
            "tune_summary.json",
            "trials/*/trial.json",
            "trials/*/config.json",
            "trials/*/result.json",
        ]
        for path in (p for pattern in ours for p in out.glob(pattern)):
            json.loads(path.read_text())  # whole files only, however full the disk got
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        r = tsweep(*run, "--resume")
        assert r.returncode == 0 and "4 finished" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    finally:
        subprocess.run(["umount", str(disk)])


@pytest.mark.e2e
@pytest.mark.slow  # a minute of real sweep; a full disk at the start is one line in tests/sweeps/test_faults.py
def test_a_disk_that_fills_during_a_sweep_prints_one_line_and_keeps_ray_and_mlflow_in_a_log(fixture_corpus, tmp_path):
    """A 20 MiB tmpfs filled at the first checkpoint: trials fail (ENOSPC), Tune, MLflow and SQLAlchemy log
    their tracebacks while the sweep is closed; the terminal shows one line, which names the file holding them."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        out = disk / "sweep"
        cmd = [sys.executable, "-m", "sweeps.cli", "run", str(SMOKE), "--profile", "smoke", "--out", str(out)]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd + ["--num-cpus", "2"], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        try:
            deadline = time.time() + 300
            while time.time() < deadline and not list(out.glob("trials/*/checkpoints/step-*.pt")):
                time.sleep(0.3)
            with open(disk / "ballast", "wb") as f:  # the disk full from here on
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
            _, stderr = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        line = one_line(subprocess.CompletedProcess(cmd, proc.returncode, "", stderr), code=2)
        assert line.startswith(f"tsweep run: error: no space left on the device of {out}") and "--resume" in line
        log = Path(line.rsplit("messages: ", 1)[1].rstrip(")"))
        assert "Traceback" in log.read_text(errors="replace")  # kept, just not on the terminal
        log.unlink()
    finally:
        subprocess.run(["umount", "-l", str(disk)])


# Ctrl-C and Ray's listeners (items 4 and 8): one smoke sweep ----------------------------------------------------


def _descendants(pid):
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        todo += children.get(p, [])
    return out


def _listening(pids):
    """(process name, address) of every listening TCP socket of ``pids``, from /proc (no ss or psutil needed)."""
    inodes = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(cols[1].split(":")[0])
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # per 32-bit word, little-endian
            found.append((inodes[cols[9]], ipaddress.ip_address(raw)))
    return found


def _loopback(addr):
    return addr.is_loopback or (addr.version == 6 and addr.ipv4_mapped is not None and addr.ipv4_mapped.is_loopback)


def test_ctrl_c_ends_the_sweep_as_interrupted_and_ray_listens_on_loopback_only(fixture_corpus, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")  # tsweep itself must keep Ray on loopback
    spec = write_spec(  # adaptive seeds, as the demo runs them: the stop is also recorded as the signal's
        tmp_path / "long.yaml", name="long", seeds={"min": 3, "max": 3}, claims="table3", max_concurrent=2,
        train={"steps": 400, "eval_every": 20},
    )  # fmt: skip
    out = tmp_path / "sweep"
    out.mkdir()  # a driver killed before this one left its lock behind
    (out / "sweep.lock").write_text(json.dumps({"pid": dead_pid(), "host": socket.gethostname(), "time": 1.0}))
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(spec), "--profile", "smoke", "--out", str(out)]
    proc = subprocess.Popen(
        cmd + ["--num-cpus", "2"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not list(out.glob("trials/*/checkpoints/step-*.pt")):
            time.sleep(0.5)
        listeners = _listening(_descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stdout[-3000:] + stderr[-3000:]
    assert "taking over the stale lock" in stderr
    resume = f"tsweep run {spec} --profile smoke --out {out} --resume"
    assert f"interrupted: 0 of 3 trials finished; resume with `{resume}`" in stderr
    assert " done in " not in stdout

    names = {name for name, _ in listeners}
    assert {"gcs_server", "raylet"} <= names, listeners
    assert [x for x in listeners if not _loopback(x[1])] == [], listeners

    from mlflow.tracking import MlflowClient

    from sweeps.run.tracking import resolve_uri

    state = json.loads((out / "sweep.json").read_text())
    client = MlflowClient(resolve_uri(state["uri"], out))
    assert state["status"] == "interrupted" and client.get_run(state["parent_run_id"]).info.status == "KILLED"
    assert state["adaptive"]["stop"] == "interrupted", state["adaptive"]
    assert state["adaptive"]["stopped"].startswith("interrupted by SIGINT during the minimum seeds: 0 of 3 trials")
    runs = client.search_runs([state["experiment_id"]], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    assert len(runs) == 2 and all(r.info.status == "KILLED" and r.data.tags["interrupted"] == "true" for r in runs)
    assert (out / "sweep.lock").read_text() == ""
