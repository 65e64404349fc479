"""The sweep layer's typed contracts agree with the sources they type: result.json's keys with the metric registry,
the scheduler dataclass with the spec's scheduler: keys, and a spec's scheduler section as it is read."""

import dataclasses
import typing

import pytest

from analysis.data.metrics import METRICS
from sweeps.run.tune_adapter import TuningContext
from sweeps.spec.sweep_spec import Scheduler, SpecError, _parse_scheduler
from sweeps.state.records import RoundRecord, SummaryEntry, TrialResult


def test_trial_result_names_every_registered_metric():
    keys = typing.get_type_hints(TrialResult)
    assert {m.name for m in METRICS} <= set(keys)
    assert all(keys[m.name] is float for m in METRICS)


def test_records_are_plain_json_dicts():
    entry: SummaryEntry = {"error": None, "status": "finished", "dev_bleu": 1.0}
    record: RoundRecord = {"name": "tune", "tune": "tune", "started": 0.0, "trials": 2}
    assert type(entry) is dict and type(record) is dict  # written by json as they are


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, Scheduler()),
        ("none", Scheduler()),
        ({"type": "none", "grace_period": 3}, Scheduler()),
        ("asha", Scheduler("asha", 1, 2, 100)),
        ({"type": "asha", "grace_period": 2, "reduction_factor": 3, "max_t": 8}, Scheduler("asha", 2, 3, 8)),
    ],
)
def test_scheduler_section(raw, expected):
    assert _parse_scheduler(raw) == expected


def test_scheduler_keeps_the_type_the_spec_gave():
    assert type(_parse_scheduler({"type": "asha", "reduction_factor": 2}).reduction_factor) is int
    assert type(_parse_scheduler({"type": "asha", "reduction_factor": 2.5}).reduction_factor) is float
    with pytest.raises(SpecError, match="scheduler: unknown key 'grace'"):
        _parse_scheduler({"type": "asha", "grace": 1})


def test_tuning_context_is_frozen():
    fields = {f.name for f in dataclasses.fields(TuningContext)}
    assert {"spec", "location", "sweep_dir", "rounds", "start_round"} <= fields
    assert TuningContext.__dataclass_params__.frozen  # type: ignore[attr-defined]
