"""sweep.json typed and read in one module (analysis/data/sweep_record.py): its parts, its version, the one line a
damaged record gets, and no other module of the library parsing the file itself."""

import json
import re

import pytest

from analysis.data.adaptive_record import StopReason
from analysis.data.sweep_record import VERSION, parse_record, read_record, record_json, require_record, write_record
from tests.helpers import ROOT
from transformer_core.errors import UserError

RECORD = {
    "name": "table3",
    "spec": "sweeps/specs/table3.yaml",
    "profile": "cpu",
    "uri": "sqlite:///mlflow.db",
    "experiment_id": "1",
    "parent_run_id": "abc",
    "status": "done",
    "metric": "dev_bleu",
    "mode": "max",
    "rounds": [{"name": "tune", "dir": "tune"}],
    "trials": ["base-s1", "A1-s1"],
    "plan": {"base-s1": {"row": "base", "seed": 1}, "A1-s1": {"row": "A1", "seed": 1}},
    "report": {"title": "Mine", "description": "", "claims": [], "paper": {}},
    "adaptive": {"version": 2, "min": 2, "max": 3, "looks": 2, "rounds": [], "stop": "budget", "stopped": "words"},
}


def test_a_record_is_typed_in_its_parts():
    state = parse_record(json.dumps(RECORD), "'x'")
    assert (state.name, state.profile, state.trials) == ("table3", "cpu", ("base-s1", "A1-s1"))
    assert state.plan["A1-s1"]["row"] == "A1" and state.rounds[0]["name"] == "tune"
    assert (state.tracking.uri, state.tracking.experiment_id, state.tracking.parent_run_id) == (
        "sqlite:///mlflow.db",
        "1",
        "abc",
    )
    assert state.adaptive is not None and state.adaptive.stop is StopReason.BUDGET  # an enum, never the sentence
    assert state.shape().title == "Mine" and not state.shape().papers
    assert state.version == VERSION and state.get("status") == "done"


def test_a_record_from_before_versions_reads_as_version_one_and_a_newer_one_is_refused():
    assert parse_record(dict(RECORD), "'x'").version == 1  # no "version" key
    with pytest.raises(UserError, match=r"sweep.json in 'x' is of version 7, written by another tsweep"):
        parse_record({**RECORD, "version": 7}, "'x'")


@pytest.mark.parametrize(
    "change, named",
    [
        ({"name": "../up"}, "name"),
        ({"plan": ["base-s1"]}, "plan"),
        ({"mode": "sideways"}, "mode"),
        ({"rounds": "tune"}, "rounds"),
        ({"objectives": [{"metric": 1}]}, "objectives"),
        ({"spec": "a\x1b[2Jb"}, "spec"),
    ],
)
def test_a_record_of_the_wrong_shape_is_one_line_naming_the_key(change, named):
    with pytest.raises(UserError) as exc:
        parse_record({**RECORD, **change}, "'x'")
    line = str(exc.value)
    assert "\n" not in line and f"not a sweep's state ({named} missing or of the wrong shape)" in line


def test_a_missing_name_is_refused_and_a_missing_plan_is_an_empty_one():
    with pytest.raises(UserError, match=r"\(name missing or of the wrong shape\)"):
        parse_record({"trials": []}, "'x'")
    assert parse_record({"name": "s"}, "'x'").plan == {}


def test_text_that_is_not_a_record_is_one_line():
    with pytest.raises(UserError, match="is unreadable: .*truncated, or not JSON"):
        parse_record('{"name": "t', "'x'")
    with pytest.raises(UserError, match="is unreadable: it is not a JSON object"):
        parse_record("[1, 2]", "'x'")


def test_a_damaged_part_is_said_when_it_is_read_not_when_the_record_is():
    state = parse_record({**RECORD, "report": {"title": 3}, "adaptive": {"version": 9}}, "'x'")
    assert state.name == "table3"  # a resume or a status still reads the record
    with pytest.raises(UserError, match="records the report's title"):
        state.shape()
    with pytest.raises(UserError, match="adaptive record is of version 9"):
        _ = state.adaptive


def test_write_stamps_the_version_and_reads_back(tmp_path):
    write_record(tmp_path, RECORD)
    on_disk = json.loads((tmp_path / "sweep.json").read_text())
    assert on_disk == record_json(RECORD) and on_disk["version"] == VERSION
    assert read_record(tmp_path).raw == on_disk
    assert read_record(tmp_path / "none") is None
    with pytest.raises(UserError, match="is not a sweep directory"):
        require_record(tmp_path / "none")


# reading the file itself: json.loads / read_text / open on a line that names sweep.json
_READS = re.compile(r"sweep\.json.*(json\.loads|read_text\(|open\()|(json\.loads|read_text\(|open\().*sweep\.json")
# the store's text of a URI sweep is handed to parse_record there
ALLOWED = {"analysis/data/sweep_record.py", "sweeps/state/sweep_state.py"}


def _readers() -> list[str]:
    out = []
    for package in ("analysis", "sweeps"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if _READS.search(line) and rel not in ALLOWED:
                    out.append(f"{rel}:{n}")
    return out


def test_no_other_module_reads_sweep_json_itself():
    assert _readers() == []


def test_the_reader_check_finds_a_reader():
    assert _READS.search('    state = json.loads((sweep_dir / "sweep.json").read_text())')
    assert not _READS.search('    if (out / "sweep.json").is_file():')
