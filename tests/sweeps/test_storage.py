"""Sweeps stored at a URI of a pyarrow filesystem (file:// here: no network; s3:// and gs:// take the same path)."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps.storage import Storage, is_uri
from tests.helpers import ROOT
from transformer_core.errors import UserError

SMOKE = ROOT / "tests" / "specs" / "smoke.yaml"


def test_uri_detection():
    assert is_uri("s3://bucket/x") and is_uri("file:///tmp/x") and is_uri("gs://b/p")
    assert not is_uri("/tmp/x") and not is_uri("sweep_runs/t") and not is_uri("C:/x")


def test_push_sends_only_what_changed_and_mirrors_deletions(tmp_path):
    store = Storage((tmp_path / "remote").as_uri())
    local = tmp_path / "local"
    (local / "checkpoints").mkdir(parents=True)
    (local / "metrics.jsonl").write_text("a\n")
    (local / "checkpoints" / "step-10.pt").write_bytes(b"x" * 1000)
    assert store.push(local, "trials/t") == 2
    assert store.push(local, "trials/t") == 0  # nothing changed, nothing sent
    with open(local / "metrics.jsonl", "a") as f:
        f.write("b\n")
    (local / "checkpoints" / "step-20.pt").write_bytes(b"y" * 1000)
    (local / "checkpoints" / "step-10.pt").unlink()  # the trainer pruned an old checkpoint
    assert store.push(local, "trials/t") == 2
    remote = tmp_path / "remote" / "trials" / "t"
    assert (remote / "metrics.jsonl").read_text() == "a\nb\n"
    assert sorted(p.name for p in (remote / "checkpoints").iterdir()) == ["step-20.pt"]

    other = tmp_path / "other-node"  # a node that never saw this trial pulls it whole
    assert store.pull("trials/t", other) == 2
    assert (other / "checkpoints" / "step-20.pt").read_bytes() == b"y" * 1000
    assert store.pull("trials/t", other) == 0
    assert store.push(other, "trials/t") == 0  # what it pulled is not sent back


def test_a_live_sqlite_file_is_pushed_as_a_consistent_snapshot(tmp_path):
    store = Storage((tmp_path / "remote").as_uri())
    local = tmp_path / "driver"
    local.mkdir()
    db = sqlite3.connect(local / "mlflow.db")
    db.execute("create table t (x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    db.commit()
    store.push(local, "", top_level_only=True)
    db.close()
    copy = sqlite3.connect(tmp_path / "remote" / "mlflow.db")
    assert copy.execute("select count(*) from t").fetchone() == (100,)
    assert not list(local.glob("*.tmp"))


def test_bad_uris_are_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="cannot be opened.*allowed"):
        Storage("nosuchfs://bucket/x")
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(UserError, match="not writable"):
        Storage((blocked / "sweep").as_uri()).check_writable()
    with pytest.raises(UserError, match="not a sweep directory"):
        from analysis.collect import collect

        collect((tmp_path / "empty").as_uri())


@pytest.fixture
def s3(tmp_path):
    """An S3-compatible server (moto's) on 127.0.0.1 with one bucket, and the environment that points pyarrow at it.

    AWS_EC2_METADATA_DISABLED keeps the AWS SDK from looking for instance metadata: no traffic leaves loopback."""
    import socket

    from moto.server import ThreadedMotoServer
    from pyarrow import fs

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    bucket = fs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        access_key="test",
        secret_key="test",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    bucket.create_dir("sweeps")
    yield env, bucket
    server.stop()


def _read(bucket, path):
    with bucket.open_input_stream(path) as f:
        return f.read().decode()


def test_smoke_sweep_on_s3_runs_in_scratch_and_reads_back_from_the_bucket(fixture_data_dir, tmp_path, s3):
    from pyarrow import fs

    aws, bucket = s3
    env = dict(
        os.environ,
        TSWEEP_DATA_DIR=str(fixture_data_dir),
        TSWEEP_SCRATCH_DIR=str(tmp_path / "scratch"),
        RAY_AUTH_MODE="disabled",
        **aws,
    )
    uri = "s3://sweeps/table3/smoke"

    def tsweep(*args):
        return subprocess.run(
            [sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
        )

    r = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", uri, "--num-cpus", "2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "4 finished" in r.stdout
    files = {
        i.path
        for i in bucket.get_file_info(fs.FileSelector("sweeps/table3/smoke", recursive=True))
        if i.type == fs.FileType.File
    }
    results = sorted(p for p in files if p.startswith("sweeps/table3/smoke/trials/") and p.endswith("/result.json"))
    assert len(results) == 4 and all(json.loads(_read(bucket, p))["status"] == "finished" for p in results)
    assert {"sweeps/table3/smoke/sweep.json", "sweeps/table3/smoke/mlflow.db"} <= files
    assert any(p.startswith("sweeps/table3/smoke/tune/") for p in files)  # Ray Tune's own state
    for p in results:  # trained in local scratch (removed after), checkpoints kept in the bucket
        trial = p.rsplit("/", 1)[0]
        sessions = [json.loads(x) for x in _read(bucket, f"{trial}/sessions.jsonl").splitlines()]
        assert all(
            s["workdir"].startswith(str(tmp_path / "scratch")) and not Path(s["workdir"]).exists() for s in sessions
        )
        assert any(f.startswith(f"{trial}/checkpoints/step-") for f in files)

    shutil.rmtree(tmp_path / "scratch")  # another machine: nothing local, everything from the bucket
    status = tsweep("status", uri)
    assert status.returncode == 0 and status.stdout.count("finished") >= 4, status.stdout + status.stderr
    report = tsweep("report", uri, "--bootstrap", "50")
    assert report.returncode == 0, report.stderr
    assert "<table" in _read(bucket, "sweeps/table3/smoke/report/report.html")
    again = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", uri)
    assert again.returncode == 2 and "--resume" in again.stderr and "Traceback" not in again.stderr
    resumed = tsweep("run", str(SMOKE), "--profile", "smoke", "--out", uri, "--resume", "--num-cpus", "2")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    for p in results:  # nothing trained again: each trial still has its single attempt
        assert len(_read(bucket, p.rsplit("/", 1)[0] + "/attempts.jsonl").splitlines()) == 1
