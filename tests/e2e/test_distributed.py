"""Scale-out on loopback only: Ray Train data parallelism, a two-node Ray cluster on 127.0.0.1."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, TINY_RUN
from transformer_core.run_config import make_run_config
from transformer_core.rundir import TrialRecord

TINY = {**TINY_RUN, "log_every": 2, "average_last": 1, "steps": 8, "eval_every": 8}


def _losses(workdir):
    return [json.loads(x)["loss"] for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


@pytest.mark.slow  # two gloo workers train in process; the two-node sweep below covers the cluster path
@pytest.mark.parametrize("storage", ["shared path", "uri"])  # uri: the s3 test
def test_two_gloo_workers_follow_one_worker_with_accumulation(fixture_corpus, fixture_data_dir, tmp_path, storage):
    import ray

    from sweeps.run.tune_adapter import data_parallel
    from transformer_core import train_and_evaluate

    values = {**TINY, "data_dir": str(fixture_data_dir), "accumulate": 2}
    single = train_and_evaluate(make_run_config(values), tmp_path / "one")
    where = tmp_path.as_uri() if storage == "uri" else str(tmp_path)
    trial = TrialRecord("two", "base", "base", 1, values, "0" * 12, profile={"profile": "test"}, sweep_dir=where)
    ray.shutdown()  # a Ray an earlier test started in this process
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # not a Ray running here
    try:
        metrics = data_parallel(trial, workers=2, gpus=0)
    finally:
        ray.shutdown()
    assert metrics["status"] == "finished"
    two = json.loads((tmp_path / "trials" / "two" / "result.json").read_text())
    assert two["target_tokens"] == single["target_tokens"]
    assert _losses(tmp_path / "trials" / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-4)
    attempts = json.loads((tmp_path / "trials" / "two" / "attempts.jsonl").read_text().splitlines()[0])
    assert attempts["workers"] == 2


def _spec(path, **doc):
    base = {
        "name": "cluster",
        "corpus": {"name": "bible-en-de"},
        "seeds": [1, 2],
        "rows": {"D": [{"label": "D1", "P_drop": 0.0}]},
        "max_concurrent": 2,
    }
    path.write_text(yaml.safe_dump({**base, **doc}))
    return path


@pytest.fixture
def two_node_cluster(fixture_corpus):
    """A head and a worker node on 127.0.0.1 (never any other address)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    )
    worker = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    yield cluster, worker
    cluster.shutdown()


def _sessions(sweep_dir):
    """Each trial's sessions so far, read while trials may be writing them: only complete lines (ending in a
    newline) count, and a trial whose file is empty, half-written or gone is left out, never an empty list."""
    found = {}
    for p in (sweep_dir / "trials").glob("*/sessions.jsonl"):
        try:
            text = p.read_text()
        except FileNotFoundError:
            continue
        lines = text[: text.rfind("\n") + 1].splitlines()
        if lines:
            found[p.parent.name] = [json.loads(x) for x in lines]
    return found


def test_sweep_on_a_two_node_loopback_cluster_uses_both_nodes(two_node_cluster, fixture_data_dir, tmp_path):
    cluster, worker = two_node_cluster
    assert cluster.address.startswith("127.0.0.1:")
    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir))
    out = tmp_path / "sweep"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeps.cli",
            "run",
            str(_spec(tmp_path / "s.yaml")),
            "--profile",
            "smoke",
            "--out",
            str(out),
            "--address",
            cluster.address,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert len(list((out / "trials").glob("*/result.json"))) == 4
    nodes = {s["node"] for runs in _sessions(out).values() for s in runs}
    assert worker.node_id in nodes and len(nodes) == 2


@pytest.mark.slow  # ~100 s idle, 250 s loaded; the two-node test in the default run covers the cluster path
@pytest.mark.parametrize(
    "storage",
    ["shared path", pytest.param("uri", marks=pytest.mark.slow)],  # uri: ~100 s; s3 test covers URIs
)
def test_removing_a_worker_node_retries_its_trial_from_its_checkpoint(
    two_node_cluster, fixture_data_dir, tmp_path, storage
):
    """With a URI, each node works in its own scratch directory: the retried trial must pull its checkpoint."""
    cluster, worker = two_node_cluster
    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir))
    out = tmp_path / "sweep"
    extra = {"tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}} if storage == "uri" else {}
    spec = _spec(tmp_path / "s.yaml", train={"steps": 200, "eval_every": 20, "eval_sentences": 4}, **extra)
    where = out.as_uri() if storage == "uri" else str(out)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeps.cli",
            "run",
            str(spec),
            "--profile",
            "smoke",
            "--out",
            where,
            "--address",
            cluster.address,
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    victim, deadline = None, time.time() + 300
    while (
        victim is None and time.time() < deadline
    ):  # a trial on the worker node with a checkpoint (at the URI, if one)
        for tid, runs in _sessions(out).items() if (out / "trials").exists() else []:
            if runs[-1]["node"] == worker.node_id and list((out / "trials" / tid / "checkpoints").glob("step-*.pt")):
                victim = tid
        time.sleep(0.2)
    assert victim, "no trial reached a checkpoint on the worker node"
    cluster.remove_node(worker)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:]
    results = list((out / "trials").glob("*/result.json"))
    assert len(results) == 4 and all(json.loads(p.read_text())["status"] == "finished" for p in results)
    attempts = [json.loads(x) for x in (out / "trials" / victim / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) >= 2 and attempts[-1]["from_step"] > 0  # resumed from its checkpoint, not from scratch
    sessions = _sessions(out)[victim]
    assert sessions[-1]["node"] != worker.node_id
    if storage == "uri":  # trained in node-local scratch, never in the sweep's location; scratch cleaned up after
        workdirs = {s["workdir"] for s in sessions}
        assert len(workdirs) >= 2 and not any(w.startswith(str(out)) for w in workdirs)
        assert not Path(sessions[-1]["workdir"]).exists()  # the dead node's copy stays where it was, like a lost disk
