"""The live view: trial events in the user's terms, from the sweep's files; and through a real smoke sweep."""

import io
import json
import time
from pathlib import Path

from sweeps.state.live import LiveView, events, snapshot, summary_line


def _sweep(tmp_path: Path) -> Path:
    plan = {f"{r}-s{s}-x": {"row": r, "seed": s, "values": {"steps": 20}} for r in ("base", "A1") for s in (1, 2)}
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "s", "trials": list(plan), "plan": plan}))
    for tid in plan:
        (tmp_path / "trials" / tid).mkdir(parents=True)
    return tmp_path


def _append(path: Path, rec: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def test_events_and_summary_follow_the_files(tmp_path):
    d = _sweep(tmp_path)
    before = {t.trial_id: t for t in snapshot(d)}
    wd = d / "trials" / "A1-s1-x"
    _append(wd / "attempts.jsonl", {"from_step": 0})
    _append(wd / "metrics.jsonl", {"kind": "train", "step": 10, "loss": 5.5, "tokens_per_second": 900.0})
    now = snapshot(d)
    assert events(before, now) == ["A1 s1: started"]
    before = {t.trial_id: t for t in now}
    _append(wd / "metrics.jsonl", {"kind": "eval", "step": 10, "steps": 20, "dev_ppl": 80.0, "dev_bleu": None})
    assert events(before, snapshot(d)) == ["A1 s1: eval at step 10/20: dev PPL 80.00"]
    before = {t.trial_id: t for t in snapshot(d)}
    (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 1.5, "dev_ppl": 60.0,
                                                "session_seconds": 100.0}))  # fmt: skip
    lines = events(before, snapshot(d))
    assert lines == ["A1 s1: finished: dev BLEU 1.50, dev PPL 60.00 in 1m40s"]
    line = summary_line(snapshot(d), time.time() - 30, est_trial_s=500.0, concurrent=2)
    assert line.startswith("1 finished, 0 running, 3 pending, 0 failed") and "ETA ~3m20s (measured)" in line


def test_non_terminal_output_is_one_line_per_event(tmp_path):
    d = _sweep(tmp_path)
    out = io.StringIO()
    view = LiveView(d, 2, out=out, tty=False)
    view.seen = {t.trial_id: t for t in snapshot(d)}
    _append(d / "trials" / "base-s2-x" / "attempts.jsonl", {"from_step": 0})
    view.tick()
    view.tick()  # nothing new: nothing printed
    assert out.getvalue() == "base s2: started\n"


# The smoke sweep through the CLI (tests/test_sweeps.py::test_smoke_sweep_completes_with_mlflow_runs) checks the
# live view's plain event lines in a real sweep's output, so no second sweep runs here.


def test_an_eval_line_names_the_step_the_curves_record_and_an_end_says_how_far_the_sweep_is(tmp_path):
    from sweeps.state.live import progress_line

    d = _sweep(tmp_path)
    wd = d / "trials" / "A1-s1-x"
    _append(wd / "attempts.jsonl", {"from_step": 0})
    before = {t.trial_id: t for t in snapshot(d)}
    _append(wd / "metrics.jsonl", {"kind": "eval", "step": 10, "steps": 20, "dev_ppl": 80.0})
    _append(wd / "metrics.jsonl", {"kind": "train", "step": 20, "loss": 5.0})  # trained on before the view looked
    assert events(before, snapshot(d)) == ["A1 s1: eval at step 10/20: dev PPL 80.00"]
    before = {t.trial_id: t for t in snapshot(d)}
    (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 1.5, "dev_ppl": 60.0,
                                                "session_seconds": 100.0}))  # fmt: skip
    now = snapshot(d)
    line = progress_line(now, time.time() - 130, concurrent=2, deadline=time.time() + 600)
    assert line.startswith("1 of 4 trials ended; elapsed 2m1") and "ETA ~3m20s" in line and "budget left 9m5" in line
    assert events(before, now, lambda: "1 of 4 trials ended")[-1].endswith(" in 1m40s [1 of 4 trials ended]")


def test_a_searchs_sampled_trials_are_followed_before_sweep_json_lists_them(tmp_path):
    d = _sweep(tmp_path)
    wd = d / "trials" / "sample-2f8c51d3-s1-0be3b4ef"
    wd.mkdir(parents=True)
    (wd / "trial.json").write_text(json.dumps({"row": "sample-2f8c51d3", "seed": 1, "group": "search",
                                               "search": {"P_drop": 0.2}, "values": {"steps": 20}}))  # fmt: skip
    before = {t.trial_id: t for t in snapshot(d)}
    _append(wd / "attempts.jsonl", {"from_step": 0})
    (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 2.0, "dev_ppl": 50.0}))
    assert events(before, snapshot(d), lambda: "1 of 5 trials ended") == [
        "sample-2f8c51d3 s1: started (P_drop=0.2)",  # a sample is named with its knobs
        "sample-2f8c51d3 s1: finished: dev BLEU 2.00, dev PPL 50.00 [1 of 5 trials ended]",
    ]


def test_a_searchs_log_counts_against_its_whole_plan_from_the_sweeps_start_and_names_confirmed_samples(tmp_path):
    """Search and confirmation rounds are one count (samples x seeds + confirm.top x confirm.seeds) and one elapsed
    time; a confirmation trial (in sweep.json's plan, no knobs of its own) is named with its sample's knobs."""
    d = tmp_path
    search = d / "trials" / "sample-2f8c51d3-s1-0be3b4ef"
    search.mkdir(parents=True)
    (search / "trial.json").write_text(json.dumps({"row": "sample-2f8c51d3", "seed": 1, "group": "search",
                                                   "search": {"lr_scale": 0.52345678, "warmup": 10},
                                                   "values": {"steps": 20}}))  # fmt: skip
    _append(search / "attempts.jsonl", {"from_step": 0})
    (search / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 2.0, "session_seconds": 60.0}))
    plan = {"sample-2f8c51d3-s2-0be3b4ef": {"row": "sample-2f8c51d3", "seed": 2, "group": "confirm",
                                            "values": {"steps": 20}}}  # fmt: skip
    (d / "sweep.json").write_text(json.dumps({"name": "s", "trials": list(plan), "plan": plan}))
    confirm = d / "trials" / "sample-2f8c51d3-s2-0be3b4ef"
    confirm.mkdir()
    out = io.StringIO()
    view = LiveView(d, concurrent=1, out=out, tty=False, total=10, started=time.time() - 600)
    view.seen = {t.trial_id: t for t in snapshot(d)}
    _append(confirm / "attempts.jsonl", {"from_step": 0})
    (confirm / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 2.5, "session_seconds": 60.0}))
    view.tick()
    lines = out.getvalue().splitlines()
    assert lines[0] == "sample-2f8c51d3 s2: started (lr_scale=0.5235, warmup=10)"
    assert "[2 of 10 trials ended; elapsed 10m0" in lines[1] and lines[1].endswith("; ETA ~8m00s]")
    assert "8 pending" in summary_line(snapshot(d), time.time(), None, 1, total=10)


def test_names_from_disk_are_escaped_and_ids_that_leave_the_sweep_are_not_followed(tmp_path):
    import os

    d = _sweep(tmp_path)
    state = json.loads((d / "sweep.json").read_text())
    state["trials"].append("../../outside")
    state["plan"]["base-s1-x"] = {"row": "base\x1b[31m", "seed": 1, "values": {"steps": "twenty"}}
    (d / "sweep.json").write_text(json.dumps(state))
    os.mkfifo(d / "trials" / "A1-s1-x" / "metrics.jsonl")  # a FIFO planted as a metrics file: read never blocks
    names = {t.trial_id: t for t in snapshot(d)}
    assert "../../outside" not in names and names["base-s1-x"].name == "base\\x1b[31m s1"
    assert names["base-s1-x"].steps == 0 and names["A1-s1-x"].step == 0
