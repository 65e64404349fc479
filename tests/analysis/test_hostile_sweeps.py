"""Empty, malformed and planted sweep directories (issue 43, items 5-9 and 11): `tsweep status`, `tsweep report`,
`load_sweep` and `tsweep evaluate` end in a table or in one line, never a traceback; only the trials of the sweep's
own plan (or its searcher's samples) are read; names from disk reach a terminal or a CSV with their control
characters escaped; one evaluate at a time on a local sweep.  Small fake sweeps on disk: no Ray, no training."""

import json
import shutil

import pandas as pd
import pytest

from analysis.data.collect import collect
from analysis.data.samples import sample_label
from analysis.report.writers import write_report
from sweeps import load_sweep
from sweeps.cli import main
from tests.analysis.test_analysis import make_sweep
from transformer_core.data.eval_set import EvalSet
from transformer_core.errors import UserError
from transformer_core.finished import done_evaluation
from transformer_core.rundir import SAFE_NAME, TrialRecord, check_name

SAMPLES = [{"lr_scale": 0.5, "warmup": 5}, {"lr_scale": 0.8, "warmup": 10}, {"lr_scale": 1.2, "warmup": 5}]
ESC = "\x1b]2;HACKED\x07\x1b[31mRED"


def _trial(root, tid, group, sampled, seed, ppl, plan=None):
    wd = root / "trials" / tid
    wd.mkdir(parents=True)
    record = {"id": tid, "group": group, "row": sample_label(sampled), "seed": seed, "values": {"steps": 20},
              "config_hash": tid[-8:] + "0000", **({"search": sampled} if group == "search" else {})}  # fmt: skip
    (wd / "trial.json").write_text(json.dumps(record))
    result = {"status": "finished", "dev_bleu": 1.0, "dev_ppl": ppl, "test_bleu": 1.0, "test_ppl": ppl, "steps": 20,
              "wall_seconds": 2.0, "train_flops": 1e9, "params": 1000}  # fmt: skip
    (wd / "result.json").write_text(json.dumps(result))
    (wd / "metrics.jsonl").write_text(
        json.dumps({"kind": "eval", "step": 10, "dev_ppl": ppl + 5, "dev_ce": 5.0}) + "\n"
    )
    (wd / "attempts.jsonl").write_text(json.dumps({"time": 1.0}) + "\n")
    if plan is not None:
        plan[tid] = {k: record[k] for k in ("group", "row", "seed", "values", "config_hash")}
    return wd


def search_sweep(root):
    """A finished search of three samples at one seed and a confirmation of the best at seed 2 (listed first in
    sweep.json's plan, as the runner writes it); dev_ppl minimised."""
    plan = {}
    _trial(root, "sample-a-s2-cccccccc", "confirm", SAMPLES[0], 2, 41.0, plan)
    for i, (sampled, ppl) in enumerate(zip(SAMPLES, (40.0, 50.0, 60.0))):
        _trial(root, f"sample-{i}-s1-{i}aaaaaaa", "search", sampled, 1, ppl)
    state = {"name": "hostile", "profile": "smoke", "profile_rules": {"profile": "smoke"}, "status": "finished",
             "metric": "dev_ppl", "mode": "min", "trials": list(plan), "plan": plan}  # fmt: skip
    (root / "sweep.json").write_text(json.dumps(state))
    return root


def _ids(root):
    return sorted(collect(root)["trial_id"])


def _status(root, capsys):
    capsys.readouterr()
    rc = main(["status", str(root)])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err, err
    return out


def _report(root, tmp_path, capsys):
    capsys.readouterr()
    rc = main(["report", str(root), "--out", str(tmp_path / "report"), "--bootstrap", "20"])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err, err
    return tmp_path / "report"


def _load(root):
    s = load_sweep(root)
    frames = [s.trials, s.results, s.curves, s.verdicts]
    if s.kind == "search":
        frames.append(s.configurations)
    return s, frames


# ------------------------------------------------------------------------------------------------------ empty
@pytest.mark.parametrize("kind", ["ablation", "search"])
def test_an_empty_sweep_has_a_status_a_one_line_report_and_empty_frames(tmp_path, capsys, kind):
    """SIGINT as soon as sweep.json appeared, an emptied plan, a search whose trials/ is empty: KeyError 'status'
    in status and report, KeyError 'row' / 'sample' in load_sweep."""
    root = tmp_path / "sweep"
    (root / "trials").mkdir(parents=True)
    state = {"name": "empty", "profile": "smoke", "status": "interrupted", "plan": {}, "trials": [],
             "metric": "dev_ppl", "mode": "min"}  # fmt: skip
    (root / "sweep.json").write_text(json.dumps(state))
    if kind == "search":
        (root / "optuna.db").write_bytes(b"")
    df = collect(root)
    assert df.empty and {"status", "row", "sample", "seed", "trial_id"} <= set(df.columns)
    assert "no trials yet" in _status(root, capsys)
    s, frames = _load(root)
    assert s.kind == kind and s.trials.empty and s.results.empty and s.curves.empty
    assert s.verdicts["verdict"].str.startswith("not measured").all() if kind == "ablation" else s.verdicts.empty
    capsys.readouterr()
    rc = main(["report", str(root), "--out", str(tmp_path / "report")])
    out, err = capsys.readouterr()
    if kind == "ablation":  # nothing to judge: one line, and nothing written
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "has no trials yet" in err, err
        assert not (tmp_path / "report").exists()
    else:  # a search's report says no sample has started
        assert rc == 0 and "no trial yet" in (tmp_path / "report" / "report.md").read_text()


# --------------------------------------------------------------------------------------------------- malformed
def _first_search(root):
    return root / "trials" / "sample-0-s1-0aaaaaaa"


def _edit(path, **changes):
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


DAMAGE = {
    "metrics-line-1": lambda wd: ((wd / "metrics.jsonl").write_text("1\n[2]\n"), (wd / "result.json").unlink()),
    "step-ten": lambda wd: ((wd / "metrics.jsonl").write_text('{"kind": "eval", "step": "ten", "dev_ppl": 3}\n'),
                            (wd / "result.json").unlink()),  # fmt: skip
    "eval-reading-a-string": lambda wd: ((wd / "metrics.jsonl").write_text('{"kind": "eval", "step": 5, "dev_ppl": '
                                                                           '"low"}\n'), (wd / "result.json").unlink()),
    "search-a-list": lambda wd: _edit(wd / "trial.json", search=[1, 2]),
    "row-a-number": lambda wd: _edit(wd / "trial.json", row=7),
    "metric-a-string": lambda wd: _edit(wd / "result.json", dev_ppl="x", dev_bleu="lots"),
    "steps-a-string": lambda wd: _edit(wd / "result.json", steps="20"),
    "status-an-object": lambda wd: _edit(wd / "result.json", status={"a": 1}),
    "sampled-strings": lambda wd: _edit(wd / "trial.json", search={"lr_scale": "abc", "warmup": "abc"}),
    "sampled-nested": lambda wd: _edit(wd / "trial.json", search={"lr_scale": [1], "warmup": 5}),
    "summary-a-list": lambda wd: (wd.parent.parent / "tune_summary.json").write_text(json.dumps({wd.name: [1]})),
}  # fmt: skip


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_malformed_values_are_read_as_a_damaged_trial_not_a_traceback(tmp_path, capsys, damage):
    root = search_sweep(tmp_path / "sweep")
    DAMAGE[damage](_first_search(root))
    df = collect(root)
    assert df["status"].map(lambda s: isinstance(s, str)).all()
    assert pd.to_numeric(df["dev_ppl"], errors="coerce").notna().sum() == df["dev_ppl"].notna().sum()  # numbers only
    _status(root, capsys)
    assert (_report(root, tmp_path, capsys) / "report.md").exists()
    _load(root)


def test_a_string_reading_marks_its_trial_corrupt(tmp_path):
    root = search_sweep(tmp_path / "sweep")
    _edit(_first_search(root) / "result.json", dev_ppl="x")
    df = collect(root).set_index("trial_id")
    assert df.loc["sample-0-s1-0aaaaaaa", "status"] == "corrupt: result.json"


def test_hypotheses_that_are_not_utf8_are_read_with_replacement(tmp_path, capsys):
    """test.hyp with bytes that are not UTF-8: UnicodeDecodeError in the report's paired bootstrap."""
    root = make_sweep(tmp_path / "sweep")
    for hyp in (root / "trials").glob("*/test.hyp"):
        hyp.write_bytes(b"\xff\xfe caf\xe9 \x80\n" * 120)
    out = write_report(root, tmp_path / "report", samples=20)
    assert (out / "report.md").exists()


def test_an_evaluation_record_that_is_not_an_object_is_scored_again(tmp_path, caplog):
    """evals/held.json = [] broke `tsweep evaluate` (AttributeError)."""
    wd = _trial(tmp_path, "t-s1-aaaaaaaa", "search", SAMPLES[0], 1, 40.0)
    es = EvalSet("held", "files:a,b", ["x"], ["y"], "f00d")
    (wd / "evals").mkdir()
    (wd / "evals" / "held.json").write_text("[]")
    assert done_evaluation(wd, es) is None
    (wd / "evals" / "held.json").write_text(json.dumps({"fingerprint": ESC}))
    caplog.clear()
    assert done_evaluation(wd, es) is None
    assert caplog.records and not any("\x1b" in r.getMessage() for r in caplog.records)  # escaped in the warning
    (wd / "result.json").write_text('"finished"')
    (wd / "evals" / "held.json").write_text(json.dumps({"fingerprint": "f00d"}))
    assert done_evaluation(wd, es) is None


# ------------------------------------------------------------------------------------------ outside the plan
def test_a_copied_trial_directory_is_not_counted(tmp_path, capsys):
    """trials/base-s1-copy made base n=3/3 from two seeds."""
    root = search_sweep(tmp_path / "sweep")
    shutil.copytree(_first_search(root), root / "trials" / "sample-0-s1-0aaaaaaa-copy")
    (root / "trials" / "stray").mkdir()
    assert "sample-0-s1-0aaaaaaa-copy" not in _ids(root) and len(_ids(root)) == 4
    s, _ = _load(root)
    assert list(s.configurations["seeds"]) == [1, 1, 1]
    ablation = make_sweep(tmp_path / "ablation")
    shutil.copytree(ablation / "trials" / "base-s1-0000abcd", ablation / "trials" / "base-s1-copy")
    df = collect(ablation)
    assert (df["row"] == "base").sum() == 3 and "base-s1-copy" not in set(df["trial_id"])


def test_a_trial_id_that_leaves_the_sweep_is_not_read(tmp_path, capsys):
    """A sweep.json trial id ../../../outside/evil made report and load_sweep read a trial outside the sweep."""
    root = search_sweep(tmp_path / "sweep")
    outside = tmp_path / "outside" / "evil"
    shutil.copytree(_first_search(root), outside)
    _edit(outside / "trial.json", id="../../outside/evil", row="evil", group="evil")
    state = json.loads((root / "sweep.json").read_text())
    for tid in ("../../outside/evil", str(outside), "a/b", ".hidden", ESC, 7):
        state["trials"].append(tid)
        if isinstance(tid, str):
            state["plan"][tid] = dict(next(iter(state["plan"].values())), row="evil")
    (root / "sweep.json").write_text(json.dumps(state))
    df = collect(root)
    assert len(df) == 4 and "evil" not in set(df["row"]) and all(SAFE_NAME.match(t) for t in df["trial_id"])
    report = _report(root, tmp_path, capsys)
    assert "evil" not in (report / "report.md").read_text()


def test_a_name_that_would_leave_its_directory_is_refused_in_one_line():
    for bad in ("..", ".hidden", "a/b", "", "a b", None):
        with pytest.raises(UserError, match=r"^trial id .* is invalid; allowed letters, digits"):
            check_name(bad, "trial id")
    assert check_name("base-s1-0a1b2c3d", "trial id") == "base-s1-0a1b2c3d"


# -------------------------------------------------------------------------------------------- terminal escapes
def test_names_from_disk_reach_the_terminal_and_csv_escaped(tmp_path, capsys):
    """A trial directory named with terminal escapes was printed raw by `tsweep status` and written into seeds.csv;
    so were a row, group, reason or error read from trial.json, result.json or tune_summary.json."""
    root = make_sweep(tmp_path / "sweep")
    _edit(root / "sweep.json", plan={})
    shutil.copytree(root / "trials" / "base-s1-0000abcd", root / "trials" / ESC)
    wd = root / "trials" / "A1-s1-0000abcd"
    _edit(wd / "trial.json", row="A1" + ESC, group="A" + ESC)
    _edit(wd / "result.json", reason=ESC, device=ESC)
    (root / "tune_summary.json").write_text(json.dumps({"A4-s1-0000abcd": {"error": "boom " + ESC + "\nTraceback"}}))
    out = _status(root, capsys)
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]2;HACKED" in out
    assert "boom \\x1b" in out and "\\x0aTraceback" in out  # one line per trial
    report = _report(root, tmp_path, capsys)
    for path in report.rglob("*"):
        if path.suffix in (".csv", ".md", ".html", ".tex"):
            assert "\x1b" not in path.read_text(encoding="utf-8", errors="replace"), path


# ---------------------------------------------------------------------------------------- one evaluate at a time
def test_a_second_evaluate_of_a_local_sweep_is_refused_while_one_runs(tmp_path, monkeypatch):
    """Two `tsweep evaluate` on one local sweep both ran: 3 of 4 trials scored twice (a URI sweep took the lock)."""
    import sweeps.run.evaluate as evaluate
    from sweeps.state.lock import SweepLock
    from transformer_core.errors import UserError

    root = search_sweep(tmp_path / "sweep")
    es = EvalSet("held", "files:a,b", ["x"], ["y"], "f00d")
    scored = []
    monkeypatch.setattr(evaluate, "evaluation_set", lambda *a, **k: es)
    monkeypatch.setattr(evaluate, "_fan_out", lambda fn, jobs, *a, **k: scored.extend(jobs) or {
        tid: {"status": "evaluated", "bleu": 1.0, "chrf": 1.0, "ppl": 2.0} for tid, _ in jobs})  # fmt: skip
    held = SweepLock.acquire(str(root), root)  # the first evaluate (or a `tsweep run`) holds the sweep
    try:
        with pytest.raises(UserError, match="one `tsweep run` or `tsweep evaluate` at a time"):
            evaluate.evaluate_sweep(root, "files:a,b", progress=False)
        assert scored == []
    finally:
        held.release()
    _, table = evaluate.evaluate_sweep(root, "files:a,b", progress=False)
    assert len(scored) == 4 and set(table["status"]) == {"evaluated"}
    assert SweepLock.acquire(str(root), root).release() is None  # released when it ended


def test_trial_records_read_back_as_the_runner_wrote_them(tmp_path):
    """The validation of trial.json keeps every record the runner writes (a plan entry, a search trial)."""
    record = TrialRecord("r-s1-aaaaaaaa", "search", "r", 1, {"steps": 1}, "aaaaaaaa0000", {"N": 6}, {}, "base", "",
                         None, {"lr_scale": 0.5, "positional": "learned", "scale_attention": True})  # fmt: skip
    root = tmp_path / "sweep"
    (root / "trials" / record.id).mkdir(parents=True)
    (root / "trials" / record.id / "trial.json").write_text(json.dumps(record.to_json()))
    (root / "sweep.json").write_text(json.dumps({"name": "x", "profile": "smoke", "plan": {}, "trials": []}))
    assert _ids(root) == [record.id]


# ------------------------------------------------------------------------------------- a second, hostile read
@pytest.mark.parametrize(
    "state",
    [{"objectives": [1]}, {"objectives": [{"metric": ["x"], "mode": "max"}]}, {"adaptive": "yes"}, {"mode": "up"},
     {"plan": {"t": 1}}, {"profile": 3}, {"name": ESC}, {"spec": "s.yaml" + ESC}, {"profile": "smoke\x1b[2J"}],
    ids=["objectives-ints", "objective-a-list", "adaptive-a-string", "mode", "plan-entry", "profile", "name-escapes",
         "spec-escapes", "profile-escapes"],
)  # fmt: skip
def test_a_sweep_json_of_the_wrong_shape_is_one_line(tmp_path, capsys, state):
    root = search_sweep(tmp_path / "sweep")
    _edit(root / "sweep.json", **state)
    for argv in (["status", str(root)], ["report", str(root), "--out", str(tmp_path / "r")]):
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "sweep.json" in err, err


def test_knob_values_of_the_wrong_type_do_not_break_status(tmp_path, capsys):
    root = search_sweep(tmp_path / "sweep")
    _edit(_first_search(root) / "trial.json", values={"steps": "x", "d_model": [1], "warmup": float("inf")})
    out = _status(root, capsys)
    assert "sample-0-s1-0aaaaaaa" in out


def test_evaluation_records_edited_by_hand_are_read_as_far_as_they_are_sound(tmp_path, capsys):
    root = make_sweep(tmp_path / "sweep")
    for i, wd in enumerate(sorted((root / "trials").glob("*-s*"))):
        result = json.loads((wd / "result.json").read_text()) if (wd / "result.json").exists() else {}
        if result.get("status") != "finished":
            continue
        (wd / "evals").mkdir()
        rec = {"fingerprint": "f00d", "config_hash": result.get("config_hash"), "bleu": 10.0 + i, "chrf": 30.0,
               "ppl": 5.0, "set": "held" + ESC, "sentences": 3, "unknown_chars": {"x": 1}}  # fmt: skip
        if i == 0:
            rec.update(bleu="lots", unknown_chars=["x"], chrf=True)
        (wd / "evals" / "held.json").write_text(json.dumps(rec))
        (wd / "evals" / f"{ESC}.json").write_text(json.dumps(rec))
        (wd / "evals" / "listed.json").write_text(json.dumps({**rec, "fingerprint": ["a"]}))
    report = _report(root, tmp_path, capsys)
    md = (report / "report.md").read_text()
    assert "held" in md and "\x1b" not in md and "listed" not in md


def test_files_planted_as_fifos_or_endless_devices_neither_block_nor_fill_memory(tmp_path):
    import os

    from tests.helpers import tsweep

    root = search_sweep(tmp_path / "sweep")
    wd = _first_search(root)
    (wd / "metrics.jsonl").unlink()
    os.mkfifo(wd / "metrics.jsonl")  # reading it would wait for ever
    (wd / "result.json").unlink()
    (wd / "result.json").symlink_to("/dev/zero")  # reading it would never end
    (root / "trials" / "sample-1-s1-1aaaaaaa" / "attempts.jsonl").unlink()
    os.mkfifo(root / "trials" / "sample-1-s1-1aaaaaaa" / "attempts.jsonl")
    r = tsweep("status", str(root), timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "corrupt: result.json" in r.stdout


def test_a_trial_directory_that_leads_out_of_the_sweep_is_not_read(tmp_path):
    root = search_sweep(tmp_path / "sweep")
    other = search_sweep(tmp_path / "other")
    shutil.rmtree(_first_search(root))
    _first_search(root).symlink_to(_first_search(other))
    assert "sample-0-s1-0aaaaaaa" not in _ids(root) and len(_ids(root)) == 3


def test_stray_entries_are_summed_up_in_one_warning(tmp_path, caplog):
    root = search_sweep(tmp_path / "sweep")
    for i in range(50):
        (root / "trials" / f"stray-{i}").mkdir()
    caplog.clear()
    assert len(_ids(root)) == 4
    lines = [r.getMessage() for r in caplog.records if "not trials of this sweep" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("50 entries")


def test_a_sweep_json_planted_as_a_fifo_is_one_line(tmp_path):
    import os

    from tests.helpers import one_line, tsweep
    from transformer_core.errors import UserError

    root = tmp_path / "sweep"
    root.mkdir()
    os.mkfifo(root / "sweep.json")
    assert "not a regular file" in one_line(tsweep("status", str(root), timeout=60))
    with pytest.raises(UserError, match="sweep.json .* is unreadable"):
        load_sweep(root)
