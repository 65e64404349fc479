"""A smoke sweep on an S3-compatible server on loopback (moto): trained in local scratch, read back from the bucket,
resumed there."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SMOKE = ROOT / "tests" / "specs" / "smoke.yaml"


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


@pytest.mark.slow  # longest sweeps; make test-slow runs them
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
