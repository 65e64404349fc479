"""A reused worker replaced when its memory after a trial passes its bound; Ray's memory-monitor kills said in one
line; the driver's one-line summary of any error (sweeps/run/worker_memory.py, diskfull.py, tune_adapter.py)."""

import types

import pytest

from sweeps.run import worker_memory as wm
from sweeps.run.tune_adapter import FaultLog, one_line
from sweeps.state.diskfull import out_of_memory, root_cause
from transformer_core.errors import UserError


def test_the_bound_is_a_share_of_the_machine_over_the_trials_that_share_it(monkeypatch):
    monkeypatch.delenv("TSWEEP_WORKER_MEMORY", raising=False)
    monkeypatch.setattr(wm.os, "cpu_count", lambda: 2)
    assert wm.worker_bound(2, 1.0, memory=24_000_000_000) == 6_000_000_000
    assert wm.worker_bound(1, 1.0, memory=24_000_000_000) == 12_000_000_000
    assert wm.worker_bound(8, 1.0, memory=24_000_000_000) == 6_000_000_000  # two cores: two at once at most
    monkeypatch.setenv("TSWEEP_WORKER_MEMORY", "1.5")
    assert wm.worker_bound(2, 1.0, memory=24_000_000_000) == 1_500_000_000
    for bad in ("0", "-1", "lots"):
        monkeypatch.setenv("TSWEEP_WORKER_MEMORY", bad)
        with pytest.raises(UserError, match=f"TSWEEP_WORKER_MEMORY='{bad}' is invalid: allowed a number of GB from"):
            wm.worker_bound(2)


def test_a_worker_over_its_bound_asks_to_be_replaced_and_the_driver_does_not_keep_it(monkeypatch):
    monkeypatch.setenv("TSWEEP_WORKER_MEMORY", "0.001")  # 1 MB: any Python process is over it
    after = wm.after_trial(2)
    assert after[wm.REPLACE_KEY] is True and after["worker_rss_gb"] > 0.001
    monkeypatch.setenv("TSWEEP_WORKER_MEMORY", "10000")
    assert wm.after_trial(2)[wm.REPLACE_KEY] is False
    assert wm.bounded_reuse_installed() and wm.bounded_reuse_installed()  # installed once, idempotent
    from ray.tune.execution.tune_controller import TuneController

    calls = []
    patched = TuneController._maybe_cache_trial_actor
    original = patched.__closure__[0].cell_contents if patched.__closure__ else None
    assert getattr(patched, "_tsweep_bounded", False) and original is not None
    monkeypatch.setattr(TuneController, "_maybe_cache_trial_actor", patched)
    # the original Tune method, recorded instead of run: the check in front of it decides whether it is reached
    cell = next(c for c in patched.__closure__ if callable(c.cell_contents))
    monkeypatch.setattr(cell, "cell_contents", lambda self, trial: calls.append(trial) or True)
    over = types.SimpleNamespace(last_result={wm.REPLACE_KEY: True})
    under = types.SimpleNamespace(last_result={wm.REPLACE_KEY: False})
    assert patched(None, over) is False and calls == []
    assert patched(None, under) is True and calls == [under]


def test_root_cause_of_an_error_that_wraps_nothing_is_itself():
    e = ValueError("plain")
    assert root_cause(e) is e
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        assert isinstance(root_cause(outer), KeyError)
    assert one_line(RuntimeError("")) == "RuntimeError"


RAY_OOM = (
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 127.0.0.1, ID: abc) where the task (actor ID: 01, name=ImplicitFunc.__init__, "
    "pid=4242, memory used=10.58GB) was running was 22.40GB / 23.50GB (0.953), which exceeds the memory usage "
    "threshold of 0.95."
)


def test_a_memory_monitor_kill_reads_as_one_line_with_the_workers_memory():
    assert out_of_memory(RAY_OOM) == "killed: out of memory at 10.6 GB"
    assert out_of_memory("1 worker(s) were killed due to the node running low on memory. Memory used: 512 MiB")
    assert out_of_memory("ValueError: bad") is None
    assert one_line(RuntimeError(RAY_OOM)) == "killed: out of memory at 10.6 GB"


def test_a_failed_worker_is_said_in_one_line_and_kept_in_the_trials_faults(tmp_path):
    (tmp_path / "trials" / "A3-s1-abc").mkdir(parents=True)
    error = tmp_path / "error.txt"
    error.write_text("Failure # 1 (occurred at 2026-11-26)\nValueError: first\n"
                     f"Failure # 2 (occurred at 2026-11-26)\n{RAY_OOM}\n")  # fmt: skip
    said = []
    payload = types.SimpleNamespace(id="A3-s1-abc")
    trial = types.SimpleNamespace(config={"trial_index": 0}, last_result={}, trial_id="t1", error_file=str(error),
                                  run_metadata=types.SimpleNamespace(num_failures=2))  # fmt: skip
    FaultLog(tmp_path, [payload], said.append).record(trial, retried=True)
    assert said == ["A3-s1-abc: killed: out of memory at 10.6 GB; retried from its checkpoint in a fresh worker "
                    "(failure 2)"]  # fmt: skip
    kept = (tmp_path / "trials" / "A3-s1-abc" / "faults.jsonl").read_text()
    assert '"reason": "killed: out of memory at 10.6 GB"' in kept and '"retried": true' in kept
    trial.config, trial.trial_id = {}, "evil\x1b[31m"  # no plan entry: Tune's id, escaped, nothing written
    FaultLog(tmp_path, [payload], said.append).record(trial, retried=False)
    assert said[-1].startswith("evil\\x1b[31m: killed") and said[-1].endswith("not retried again: failed (failure 2)")


def test_the_concurrency_is_lowered_where_the_largest_rows_memory_times_it_passes_the_machines():
    from sweeps.spec.sweep_spec import load_spec, plan
    from tests.helpers import SMOKE

    trials = plan(load_spec(SMOKE), "smoke")
    rows = sorted({t.row for t in trials})
    assert wm.fit_concurrency(trials, 2, {}, memory=64_000_000_000) == (2, None)  # estimated: ~1 GB each fits
    n, why = wm.fit_concurrency(trials, 4, {rows[0]: 3.0e9}, memory=8_000_000_000)  # measured: 3 GB, 6.4 GB usable
    assert n == 2 and why.startswith(f"max_concurrent 4 -> 2: the largest row ({rows[0]}) holds 2.8 GiB (measured)")
    assert wm.fit_concurrency(trials, 2, {rows[0]: 30e9}, memory=8_000_000_000)[0] == 1  # never below one


def test_measured_peaks_come_from_the_trials_results(tmp_path):
    import json

    for tid, row, peak in (("a", "base", 0.7), ("b", "base", 0.9), ("c", "A3", "x")):
        (tmp_path / "trials" / tid).mkdir(parents=True)
        (tmp_path / "trials" / tid / "trial.json").write_text(json.dumps({"row": row}))
        (tmp_path / "trials" / tid / "result.json").write_text(json.dumps({"peak_rss_gb": peak}))
    assert wm.measured_peaks(tmp_path) == {"base": 0.9e9}


def test_the_report_lists_a_finished_trial_whose_worker_was_killed_first():
    import pandas as pd

    from analysis.report.model import problems

    df = pd.DataFrame([
        {"trial_id": "a", "row": "base", "seed": 1, "status": "finished", "reason": None,
         "faults": "killed: out of memory at 10.6 GB"},
        {"trial_id": "b", "row": "base", "seed": 2, "status": "finished", "reason": None, "faults": None},
        {"trial_id": "c", "row": "A3", "seed": 1, "status": "failed", "reason": "killed: out of memory at 9.9 GB",
         "faults": None},
    ])  # fmt: skip
    out = problems(df, {})
    assert list(out["trial_id"]) == ["c", "a"]
    assert out.iloc[1]["status"] == "finished after a retry"
    assert out.iloc[1]["reason"] == "retried after: killed: out of memory at 10.6 GB"
