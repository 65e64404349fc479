"""The metric registry (analysis/data/metrics.py) is what the spec, the collector, the trial, the claims, the
verdicts and the report read: each of them agrees with it, no library module keeps a list of readings or metrics
of its own, an evaluation set's readings leave nothing in it, and a sweep's task is read from its frame in one
place."""

import ast
import inspect

import pandas as pd

from analysis.data import claims as claims_module
from analysis.data import collect
from analysis.data.claims import Claim, claims_for, parse_claim
from analysis.data.metrics import (
    AT_EVAL,
    BY_NAME,
    CLAIM_READINGS,
    CURVE_KEYS,
    METRICS,
    QUALITY,
    READINGS,
    SET_METRICS,
    TASKS,
    default_mode,
    eval_report,
    final_report,
    for_task,
    get_reading,
    is_reading,
    objectives,
    reading_of_metric,
    set_readings,
    sweep_task,
)
from sweeps.spec.sweep_spec import SpecError, parse_spec
from tests.helpers import ROOT


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
        metric = BY_NAME[reading.column]
        assert reading.higher_is_better == (metric.mode == "max"), reading.name
    for task in TASKS.values():
        assert all(task.name in BY_NAME[READINGS[r].column].tasks for r in task.readings), task.name


# ------------------------------------------------------------------------------------------- one record per task
def test_the_registry_has_a_record_for_every_task_a_trial_can_run():
    from transformer_core.run_config import TASKS as RUNNABLE

    assert tuple(TASKS) == RUNNABLE and all(t.name == name for name, t in TASKS.items())
    assert for_task(None) is for_task("no such task") is TASKS["translation"]


def test_each_tasks_lists_are_consistent_with_its_metrics():
    for task in TASKS.values():
        reported = {m.name for m in METRICS if task.name in m.tasks}
        assert set(task.default_readings) <= set(task.readings) and set(task.versus) <= set(task.readings)
        assert set(task.readings) <= set(task.table) and all(r in READINGS for r in task.table)
        assert task.final == objectives(task.name)  # a trial reports at its end every objective a spec may name
        assert {k for k, _ in task.status} <= reported and len(task.status) == 2
        at_eval = {m.name for m in METRICS if m.at_eval and task.name in m.tasks}
        assert all(k in at_eval or READINGS[k].column in at_eval for k in task.curves), task.name
    assert CURVE_KEYS == ("dev_ce", "dev_ppl", "dev_bleu", "dev_bpb")
    assert AT_EVAL == ("dev_bleu", "dev_ppl", "dev_bpb")
    assert CLAIM_READINGS == ("dev_bleu", "dev_ce", "test_bleu", "dev_bpb", "test_bpb")


def test_every_module_reads_its_per_task_lists_from_the_registry():
    """What the spec, the claims, the trial, Tune's reports, the verdicts, the report and the API use per task is
    the registry's, by identity where a module names a list."""
    import sweeps.api
    from analysis.report import tables
    from analysis.stats.verdicts import table_readings
    from sweeps.run import replicates, tune_adapter

    assert sweeps.api.CURVE_KEYS is CURVE_KEYS and replicates.REPORTED is AT_EVAL
    assert claims_module.RECORDED_READINGS is CLAIM_READINGS and Claim.readings is QUALITY
    assert tables.PAPER_READINGS is TASKS["translation"].table
    for name, task in TASKS.items():
        frame = pd.DataFrame({"task": [None if name == "translation" else name], "row": ["x"]})
        assert table_readings(frame, [], versus_rows=["x"]) == list(task.versus)
        assert list(claims_for(name, [Claim("c", (("a", ">", "b"),), readings=task.readings)])[0][0].readings) \
            == list(task.readings)  # fmt: skip
        default = parse_claim({"id": "c", "compare": "A > base"}, "claims[0]", ["base", "A"], name)
        assert default.readings == task.default_readings
        result = {"task": None if name == "translation" else name, "status": "finished",
                  **{m.name: 1.0 for m in METRICS}, "steps": 3}  # fmt: skip
        scores = tune_adapter._final_metrics(result)
        assert [k for k in scores if k in BY_NAME] == list(task.final)
        worst = final_report({**result, "status": "diverged"})
        assert all(v == (0.0 if BY_NAME[k].mode == "max" else float("inf")) for k, v in worst.items())
    for metric in objectives("translation") + objectives("lm"):
        r = reading_of_metric(metric)
        assert r is None or READINGS[r].column == metric
    assert reading_of_metric("dev_ppl") == "dev_ce" and reading_of_metric("test_ppl") is None


def _literal_lists(path):
    """(line, names) of every tuple, list or set literal of two or more registered metric or reading names."""
    names = set(BY_NAME) | set(READINGS)
    tree = ast.parse(path.read_text())
    allowed = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id in KEPT_APART for t in n.targets)}  # fmt: skip
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in allowed:
            found = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if len(found) > 1:
                yield node.lineno, found


KEPT_APART = ("RESULT_KEYS",)  # collect's columns of result.json in the frame's order (every metric among them)


def test_no_library_module_keeps_a_list_of_metrics_or_readings_of_its_own():
    """A list of two or more metric or reading names written out anywhere in analysis/ or sweeps/ but the registry
    is a second home for what a task reports or judges: each is derived from analysis/data/metrics.py."""
    found = [f"{path.relative_to(ROOT)}:{line} {names}" for package in ("analysis", "sweeps")
             for path in sorted((ROOT / package).rglob("*.py")) if path != ROOT / "analysis" / "data" / "metrics.py"
             for line, names in _literal_lists(path)]  # fmt: skip
    assert not found, found


# ------------------------------------------------------------------------------------------- evaluation sets
def test_an_evaluation_sets_readings_are_made_from_the_registry_and_never_added_to_it():
    before = dict(READINGS)
    test = set_readings("test")
    assert [r.name for r in test] == [f"test:{m}" for m in SET_METRICS] == [r.column for r in test]
    assert [r.label for r in test] == ["test BLEU", "test chrF", "test cross-entropy (nats, ln PPL)"]
    assert [r.higher_is_better for r in test] == [True, True, False]
    assert get_reading("wmt-x:bleu") == set_readings("wmt-x")[0] and is_reading("wmt-x:ce")
    assert not is_reading("wmt-x:ppl") and not is_reading(":bleu") and not is_reading("bleu")
    try:
        READINGS["test:bleu"] = test[0]  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("READINGS is read-only")
    assert dict(READINGS) == before
    for m in SET_METRICS.values():  # each set metric re-judges a dev reading in its direction
        assert READINGS[m.from_dev].higher_is_better == m.higher_is_better


def test_a_report_with_named_sets_leaves_the_registry_as_it_was(tmp_path):
    from analysis.report.model import build
    from tests.analysis.test_analysis import make_sweep
    from tests.analysis.test_report_family import _with_named_set

    before = dict(READINGS)
    model = build(_with_named_set(make_sweep(tmp_path / "s")), samples=20)
    assert model.evalsets is not None and model.evalsets.names == ["test", "wmt-x"]
    assert any(c == "wmt-x BLEU" for c in model.evalsets.claims["wmt-x"]["reading"])
    assert dict(READINGS) == before


# ------------------------------------------------------------------------------------------- the sweep's task
def test_the_sweeps_task_is_read_from_its_frame_in_one_place():
    assert sweep_task(pd.DataFrame({"row": ["base"]})) == "translation"  # no task column (an old collect)
    assert sweep_task(pd.DataFrame({"task": [None, float("nan")]})) == "translation"  # translation records none
    assert sweep_task(pd.DataFrame({"task": [None, "lm"]})) == "lm"
    assert sweep_task(pd.DataFrame(columns=["task"])) == "translation"  # no trials yet
    from analysis.report import evalsets, model, plots, tables
    from analysis.stats import verdicts
    from sweeps.cli import sweep
    from sweeps.run import evaluate

    for module in (evalsets, model, plots, tables, verdicts, sweep, evaluate):
        source = inspect.getsource(module)
        assert '"bpb_dev" in' not in source and '"bleu_dev" not in' not in source and "sweep_kind" not in source
        assert getattr(module, "sweep_task", sweep_task) is sweep_task, module.__name__  # imported, not defined
