"""The metric registry (analysis/data/metrics.py) is what the spec, the collector, the trial, the claims and the
verdicts read: each of them agrees with it."""

from analysis.data import collect
from analysis.data.metrics import (
    BY_NAME,
    METRICS,
    READINGS,
    TASK_READINGS,
    default_mode,
    eval_report,
    objectives,
)
from sweeps.spec.sweep_spec import SpecError, parse_spec


def test_a_spec_optimises_the_registered_objectives_of_its_task_the_first_by_default():
    assert objectives("translation") == ("dev_bleu", "dev_ppl", "test_bleu", "test_ppl")
    assert objectives("lm") == ("dev_ppl", "dev_bpb", "test_ppl", "test_bpb")
    assert parse_spec({"name": "t", "seeds": [1]}).metric == "dev_bleu"
    lm = parse_spec({"name": "t", "task": "lm", "corpus": {"name": "bible-en-de"}, "seeds": [1]})
    assert (lm.metric, lm.mode) == ("dev_ppl", "min")
    for metric in objectives("translation"):
        spec = parse_spec({"name": "t", "seeds": [1], "metric": metric})
        assert spec.mode == BY_NAME[metric].mode == default_mode(metric)
    try:
        parse_spec({"name": "t", "seeds": [1], "metric": "dev_chrf"})
    except SpecError as exc:
        assert "allowed dev_bleu, dev_ppl, test_bleu, test_ppl" in str(exc)
    else:
        raise AssertionError("dev_chrf is not an objective")


def test_the_collector_reads_every_registered_metric_as_a_number():
    assert {m.name for m in METRICS} <= set(collect.RESULT_KEYS) and {m.name for m in METRICS} <= collect.NUMBERS


def test_the_trial_reports_the_at_eval_metrics_of_its_task_and_nothing_without_the_sweeps_metric():
    record = {"step": 10, "dev_bleu": 20.0, "dev_ppl": 5.0, "dev_ce": 1.6}
    assert eval_report(record) == {"step": 10, "dev_bleu": 20.0, "dev_ppl": 5.0, "done": False}
    lm = {"step": 10, "dev_ppl": 5.0, "dev_bpb": 1.2}
    assert eval_report(lm) == {"step": 10, "dev_ppl": 5.0, "dev_bpb": 1.2, "done": False}
    assert eval_report({"step": 10, "dev_bleu": None, "dev_ppl": 5.0}) is None  # eval_bleu: final


def test_every_reading_is_read_from_a_metric_its_tasks_report_in_its_direction():
    for reading in READINGS.values():
        # an evaluation set's reading (analysis.report.evalsets registers them as it reads sets)
        if ":" in reading.name:
            continue
        metric = BY_NAME[reading.column]
        assert reading.higher_is_better == (metric.mode == "max"), reading.name
    for task, readings in TASK_READINGS.items():
        assert all(task in BY_NAME[READINGS[r].column].tasks for r in readings), task
