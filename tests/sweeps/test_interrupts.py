"""When a round of a sweep is complete, and what "stopped early" means in the status: the bookkeeping behind an
interrupted sweep (real sweeps stopped by signals: tests/e2e/test_interrupts_e2e.py)."""

import json
from types import SimpleNamespace

import pytest


def test_a_round_is_complete_only_when_every_trial_has_a_result_an_error_or_a_schedulers_stop(tmp_path):
    """A trial Tune listed (terminated) but whose result.json is gone counts as without a result."""
    from sweeps.run.runner import _without_result

    trials = [SimpleNamespace(trial_id=f"t{i}", config_hash=f"h{i}") for i in range(4)]
    results = {"t0": {"status": "finished"}}
    ctx = SimpleNamespace(result=lambda tid, h: results.get(tid))
    summary = {"t1": {"error": "RuntimeError: boom"}, "t2": {"stopped_early": True}, "t3": {"status": "finished"}}
    assert _without_result(ctx, trials, summary, None) == 1  # t3: listed as finished, result.json gone
    results["t3"] = {"status": "finished"}
    assert _without_result(ctx, trials, summary, None) == 0
    assert _without_result(ctx, trials, summary, None, errors_end=False) == 1  # after a signal: t1 runs again
    del summary["t2"]["stopped_early"]  # terminated without a result, and no scheduler said it stopped it
    assert _without_result(ctx, trials, summary, None) == 1


@pytest.mark.parametrize("sweep_status,entry,expected", [
    ("interrupted", {"status": None, "error": None}, "interrupted"),
    ("running", {"status": None, "error": None}, "running"),
    ("finished", {"status": None, "error": None, "stopped_early": True}, "stopped early"),
])  # fmt: skip
def test_stopped_early_only_where_the_scheduler_said_so(tmp_path, sweep_status, entry, expected):
    from analysis.data.collect import collect

    tid = "base-s1-0000abcd"
    record = {"id": tid, "group": "base", "row": "base", "seed": 1, "values": {"steps": 20}, "config_hash": "0000abcd"}
    wd = tmp_path / "trials" / tid
    wd.mkdir(parents=True)
    (wd / "trial.json").write_text(json.dumps(record))
    (wd / "attempts.jsonl").write_text(json.dumps({"time": 1.0}) + "\n")
    plan = {tid: {k: record[k] for k in ("group", "row", "seed", "values", "config_hash")}}
    state = {"name": "x", "profile": "smoke", "status": sweep_status, "trials": [tid], "plan": plan}
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    (tmp_path / "tune_summary.json").write_text(json.dumps({tid: entry}))  # listed by Tune; no result.json
    assert collect(tmp_path).set_index("trial_id").loc[tid, "status"] == expected
