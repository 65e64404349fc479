"""Workers killed for memory and workers over their memory bound, in a real sweep (issue: the demo's reused workers
grew until Ray's memory monitor killed them and the driver ended in a traceback)."""

import json

import pytest

from tests.e2e.conftest import e2e_env
from tests.helpers import SMOKE, tsweep


@pytest.mark.slow  # two sessions of kills and retries; a reused worker's memory: tests/sweeps/test_reuse_actors.py
def test_memory_monitor_kills_are_named_retried_and_resumable_and_workers_over_their_bound_are_replaced(
    fixture_corpus, fixture_data_dir, tmp_path
):
    out = tmp_path / "sweep"
    run = ["run", str(SMOKE), "--profile", "smoke", "--out", str(out), "--num-cpus", "2"]
    # Ray's memory monitor told that the machine is always short of memory: it kills every trial's worker
    env = dict(e2e_env(fixture_data_dir), RAY_memory_usage_threshold="0.02", RAY_memory_monitor_refresh_ms="100")
    r = tsweep(*run, env=env, timeout=600)
    kills = [x for x in r.stdout.splitlines() if ": killed: out of memory at " in x]
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    assert any("retried from its checkpoint in a fresh worker" in x for x in kills), r.stdout[-3000:]
    assert any("not retried again: failed" in x for x in kills)
    assert len(r.stderr.strip().splitlines()) == 1 and "--resume" in r.stderr, r.stderr
    status = tsweep("status", str(out), env=e2e_env(fixture_data_dir))
    assert status.returncode == 0 and "killed: out of memory at" in status.stdout, status.stdout

    # resumed with room, and a worker bound of 1 MB: every trial in a fresh worker, each kill in its result
    env = dict(e2e_env(fixture_data_dir), TSWEEP_WORKER_MEMORY="0.001")
    r = tsweep(*run, "--resume", env=env, timeout=600)
    assert r.returncode == 0 and "4 finished" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "[4 of 4 trials ended; elapsed " in r.stdout  # the plain log says how far the sweep is
    pids, results = set(), []
    for wd in (out / "trials").iterdir():
        sessions = [json.loads(x) for x in (wd / "sessions.jsonl").read_text().splitlines()]
        pids |= {s["pid"] for s in sessions}
        results.append(json.loads((wd / "result.json").read_text()))
    assert len(pids) == 4  # the smoke sweep with no bound runs its four trials in two reused workers
    assert all(res["peak_rss_gb"] > 0.05 for res in results)
    assert any(any(f.startswith("killed: out of memory at") for f in res.get("faults", [])) for res in results)
    status = tsweep("status", str(out), env=e2e_env(fixture_data_dir))
    assert "retried after: killed: out of memory" in status.stdout and "peak GB" in status.stdout
