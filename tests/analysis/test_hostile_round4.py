"""Hostile sweep directories, round 4: JSON nested too deeply for Python's decoder (a RecursionError, not a
JSONDecodeError) in any of a sweep's state files, an adaptive record whose fields have the wrong type, and a
--bootstrap too large to run.  Each is one line and exit 2 (sweep.json), or a damaged trial left out (a trial's
files), never a traceback; an earlier report stays as it was.  Small fake sweeps on disk: no Ray, no training."""

import json

import pytest

from analysis.data.adaptive_record import read_adaptive
from analysis.data.collect import collect
from analysis.data.files import read_json
from analysis.data.sweep_record import parse_record
from sweeps.cli import main
from sweeps.state.live import snapshot
from tests.helpers import DEEP, refused
from transformer_core.errors import UserError
from transformer_core.rundir import loads

TRIAL = "A1-s1-0000abcd"  # a finished trial of make_sweep's


def _report(made_sweep, out, capsys) -> int:
    capsys.readouterr()
    return main(["report", str(made_sweep), "--out", str(out), "--bootstrap", "20"])


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------------------------------ JSON nested too deeply
def test_json_nested_too_deeply_is_unreadable_json_not_a_recursion_error(tmp_path):
    with pytest.raises(RecursionError):
        json.loads(DEEP)  # what every reader met before
    with pytest.raises(json.JSONDecodeError) as err:
        loads(DEEP)
    assert str(err.value) == "arrays or objects nested too deeply to read"
    with pytest.raises(ValueError):
        loads(DEEP.encode())
    assert loads('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]} and loads(b"[[[]]]") == [[[]]]
    (tmp_path / "x.json").write_text(DEEP)
    with pytest.raises(ValueError):
        read_json(tmp_path / "x.json")
    with pytest.raises(UserError, match="nested too deeply to read") as err:
        parse_record(DEEP, "'x'")
    assert "\n" not in str(err.value)


def test_a_sweep_json_nested_too_deeply_is_one_line_and_keeps_the_earlier_report(made_sweep, tmp_path, capsys):
    out = tmp_path / "report"
    assert _report(made_sweep, out, capsys) == 0
    before = _files(out)
    (made_sweep / "sweep.json").write_text(DEEP)
    for argv in (["status", made_sweep], ["status", made_sweep, "--watch"], ["report", made_sweep, "--out", out]):
        refused(argv, capsys, "sweep.json in ", "is unreadable: arrays or objects nested too deeply to read")
    assert _files(out) == before


def _status(made_sweep, capsys) -> str:
    capsys.readouterr()
    assert main(["status", str(made_sweep)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return out


@pytest.mark.parametrize("name", ["result.json", "trial.json", "attempts.jsonl", "metrics.jsonl"])
def test_a_trial_file_nested_too_deeply_is_read_as_a_truncated_one(made_sweep, tmp_path, capsys, name):
    """The trial is what the same file cut short makes of it (a corrupt result, a trial left out, a line not read):
    in collect, the live view, status and the report."""
    path = made_sweep / "trials" / TRIAL / name
    path.write_text('{"status": "fini' + ("\n" if name.endswith("l") else ""))
    cut = (collect(made_sweep), [vars(t) for t in snapshot(made_sweep)], _status(made_sweep, capsys))
    path.write_text(DEEP + ("\n" if name.endswith("l") else ""))
    deep = (collect(made_sweep), [vars(t) for t in snapshot(made_sweep)], _status(made_sweep, capsys))
    assert deep[0].equals(cut[0]) and deep[1:] == cut[1:]
    if name == "result.json":
        assert deep[0].set_index("trial_id").loc[TRIAL, "status"] == "corrupt: result.json"
        assert "corrupt: result.json" in deep[2]
    assert _report(made_sweep, tmp_path / "report", capsys) == 0, capsys.readouterr().err
    assert (tmp_path / "report" / "report.md").is_file()


def test_the_lock_and_the_push_manifest_nested_too_deeply_read_as_none(tmp_path):
    from sweeps.state.lock import _parse
    from sweeps.state.storage import _PUSHED, _read_manifest

    assert _parse(DEEP) == {}
    (tmp_path / _PUSHED).write_text(DEEP)
    assert _read_manifest(tmp_path) == {}


# ------------------------------------------------------------------------------------ a damaged adaptive record
BASE = {"min": 2, "max": 3}
DAMAGED = {
    "looks-a-string": ({"looks": "x"}, "looks 'x' (allowed an integer >= 1)"),
    "looks-zero": ({"looks": 0}, "looks 0 (allowed an integer >= 1)"),
    "spent-a-string": ({"spent_seconds": "x"}, "spent_seconds 'x' (allowed a number of seconds >= 0)"),
    "rounds-a-number": ({"rounds": 5}, "rounds 5 (allowed a list of {round, added} objects)"),
    "rounds-not-objects": ({"rounds": [5, "x"]}, "rounds [5, 'x'] (allowed a list of {round, added} objects)"),
    "round-added-a-list": ({"rounds": [{"round": 1, "added": ["D1"]}]}, "rounds [{'round': 1, 'added': ['D1']}]"),
    "unreached-a-string": ({"unreached": "ab"}, "unreached 'ab' (allowed an object of claim: budget strings)"),
    "unreached-a-number": ({"unreached": 5}, "unreached 5 (allowed an object of claim: budget strings)"),
    "evidence-unknown": ({"evidence": "zz"}, "evidence 'zz' (allowed 'p' or 'e')"),
    "min-a-string": ({"min": "a"}, "min 'a' (allowed an integer)"),
    "stopped-a-number": ({"version": 2, "stopped": 5}, "stopped 5 (allowed a string)"),
    "version-a-list": ({"version": [1]}, "version [1] (allowed 1 or 2)"),
}


@pytest.mark.parametrize("case", list(DAMAGED), ids=list(DAMAGED))
def test_an_adaptive_record_of_the_wrong_types_is_damaged_in_one_line(case):
    fields, needle = DAMAGED[case]
    with pytest.raises(UserError) as err:
        read_adaptive({**BASE, **fields}, "'x'")
    msg = str(err.value)
    assert msg.startswith("sweep.json in 'x': its adaptive record is damaged (edited by hand?): ") and needle in msg
    assert "\n" not in msg and "newer" not in msg


@pytest.mark.parametrize("case", ["looks-a-string", "rounds-not-objects"])
def test_the_report_of_a_damaged_adaptive_record_is_one_line_and_keeps_the_earlier_report(made_sweep, tmp_path, capsys,
                                                                                          case):  # fmt: skip
    fields, needle = DAMAGED[case]
    out = tmp_path / "report"
    assert _report(made_sweep, out, capsys) == 0
    before = _files(out)
    state = json.loads((made_sweep / "sweep.json").read_text())
    (made_sweep / "sweep.json").write_text(json.dumps({**state, "adaptive": {**BASE, **fields}}))
    refused(["report", made_sweep, "--out", out, "--bootstrap", "20"], capsys, "its adaptive record is damaged", needle)
    assert _files(out) == before


def test_a_long_damaged_value_is_shown_cut():
    with pytest.raises(UserError) as err:
        read_adaptive({**BASE, "looks": "x" * 10_000}, "'x'")
    assert len(str(err.value)) < 300 and "..." in str(err.value)
    with pytest.raises(UserError, match="stop 'yyyy") as err:
        read_adaptive({**BASE, "version": 2, "stop": "y" * 10_000}, "'x'")
    assert len(str(err.value)) < 300


def test_sound_adaptive_records_read_as_before():
    rounds = [{"round": 1, "added": {"D1": "D-dropout-helps: dev_bleu"}, "started": 1.5}]
    rec = read_adaptive({**BASE, "looks": 2, "rounds": rounds, "spent_seconds": 12, "unreached": {"C": "2h"},
                         "evidence": "e", "version": 2, "stop": "max", "stopped": "max seeds (3) reached"})  # fmt: skip
    assert rec is not None and (rec.looks, rec.rounds, rec.spent_seconds, rec.unreached) == (2, tuple(rounds), 12.0,
                                                                                             {"C": "2h"})  # fmt: skip
    assert read_adaptive({"looks": 3, "rounds": [{}], "stop": "max", "spent_seconds": None}).looks == 3
    with pytest.raises(UserError, match="of version 9, written by a newer tsweep"):
        read_adaptive({**BASE, "version": 9})


# ------------------------------------------------------------------------------------------------ --bootstrap
@pytest.mark.parametrize("value", ["99999999999999999999", "10001"])
def test_a_bootstrap_too_large_is_refused_in_one_line(made_sweep, tmp_path, capsys, value):
    refused(["report", made_sweep, "--out", tmp_path / "report", "--bootstrap", value], capsys,
            f"--bootstrap {value} is too many: allowed a whole number from 1 to 10,000 (default 1,000)")  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_an_evaluation_record_nested_too_deeply_is_read_as_damaged(made_sweep, tmp_path, capsys):
    """The report's reader of a trial's evaluation records reads one nested too deeply as one it cannot read: the
    report is written."""
    path = made_sweep / "trials" / TRIAL / "evals" / "ood.json"
    path.parent.mkdir()
    path.write_text(DEEP)
    assert _report(made_sweep, tmp_path / "report", capsys) == 0, capsys.readouterr().err
    assert (tmp_path / "report" / "report.md").is_file()


def test_whether_a_sweep_is_a_search_reads_a_trial_json_nested_too_deeply_as_unreadable(tmp_path):
    from analysis.report.search_report import is_search_sweep

    (tmp_path / "trials" / "x").mkdir(parents=True)
    (tmp_path / "trials" / "x" / "trial.json").write_text(DEEP)
    assert is_search_sweep(tmp_path) is False
