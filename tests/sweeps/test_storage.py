"""Sweeps stored at a URI of a pyarrow filesystem (file:// here: no network; s3:// and gs:// take the same path)."""

import sqlite3

import pytest

from sweeps.state.storage import Storage, is_uri
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
        from analysis.data.collect import collect

        collect((tmp_path / "empty").as_uri())
