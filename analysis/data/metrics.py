"""The metric registry: every score a trial reports, every reading a verdict judges, and per task what it reports
and judges, declared once.

A ``Metric`` is a key of result.json (and, where ``at_eval``, of each evaluation record in metrics.jsonl, which the
trial reports to Tune as it trains): its label, direction, unit, the tasks that report it and whether a spec may
optimise it (``metric:``, ``search.objectives``).  A ``Reading`` is what the verdicts test, read from a column of
the collected frame (``dev_ce`` is ln ``dev_ppl``).  A ``Task`` holds the lists a sweep of one task is reported by:
the readings its claims may name and are judged on by default, those a row no claim covers is judged on, the
reproduction table's readings, what a trial reports to Tune at its end, a learning curve's keys, the columns of
``tsweep status`` and whether evaluation sets are judged; ``sweep_task`` is the one place a sweep's task is read
from its frame.  An evaluation set's readings (``SET:bleu``, ``SET:chrf``, ``SET:ce``) are made from SET_METRICS
by ``get_reading`` when asked for: READINGS is read-only.  Read by the spec (objectives and their default mode),
the collector (the result keys it reads as numbers), the trial (what it reports at an evaluation and at its end),
the claims (which readings a task's claims may name), the verdicts (direction and label of each reading) and the
report (what each task shows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Optional


@dataclass(frozen=True)
class Metric:
    name: str  # the key in result.json (and in an evaluation record of metrics.jsonl where at_eval)
    label: str
    mode: str  # "max" or "min": which way is better
    unit: str
    tasks: tuple[str, ...]  # the tasks whose trials report it
    objective: bool = False  # a spec's metric or search objective may name it
    at_eval: bool = False  # in every evaluation record, and reported to Tune as the trial trains


# In this order: a task's objectives are listed (and its first is a spec's default metric) as they come here.
METRICS = (
    Metric("dev_bleu", "dev BLEU", "max", "BLEU", ("translation",), objective=True, at_eval=True),
    Metric("dev_ppl", "dev perplexity", "min", "per wordpiece", ("translation", "lm"), objective=True, at_eval=True),
    Metric("dev_bpb", "dev bits per byte", "min", "bits per byte", ("lm",), objective=True, at_eval=True),
    Metric("test_bleu", "test BLEU", "max", "BLEU", ("translation",), objective=True),
    Metric("test_ppl", "test perplexity", "min", "per wordpiece", ("translation", "lm"), objective=True),
    Metric("test_bpb", "test bits per byte", "min", "bits per byte", ("lm",), objective=True),
    Metric("dev_chrf", "dev chrF", "max", "chrF", ("translation",)),
    Metric("test_chrf", "test chrF", "max", "chrF", ("translation",)),
)
BY_NAME = {m.name: m for m in METRICS}


def objectives(task: str) -> tuple[str, ...]:
    """The metrics a spec of this task may optimise, its default first."""
    return tuple(m.name for m in METRICS if m.objective and task in m.tasks)


def default_mode(metric: str) -> str:
    """max or min: the direction of a registered metric (a cost such as params: min)."""
    m = BY_NAME.get(metric)
    return m.mode if m else "min"


def eval_report(record: dict) -> Optional[dict]:
    """What the trial reports to Tune from an evaluation record: the at-eval metrics of the task whose own ones
    (those no other task reports) the record has; None where it has none (an evaluation without BLEU under
    ``eval_bleu: final``: Tune, ASHA and Optuna need the sweep's metric as a number in every report)."""
    for task in TASKS:
        keys = [m.name for m in METRICS if m.at_eval and task in m.tasks]
        own = [m.name for m in METRICS if m.at_eval and m.tasks == (task,)]
        if all(record.get(k) is not None for k in own):
            return {"step": record["step"], **{k: record[k] for k in keys}, "done": False}
    return None


@dataclass(frozen=True)
class Reading:
    name: str
    label: str
    higher_is_better: bool
    column: str  # column of the collected frame it is computed from


READINGS: Mapping[str, Reading] = MappingProxyType({
    "dev_bleu": Reading("dev_bleu", "dev BLEU", True, "dev_bleu"),
    "dev_ce": Reading("dev_ce", "dev cross-entropy (nats, ln PPL)", False, "dev_ppl"),
    "test_bleu": Reading("test_bleu", "test BLEU", True, "test_bleu"),
    "dev_bpb": Reading("dev_bpb", "dev bits per byte", False, "dev_bpb"),  # task lm
    "test_bpb": Reading("test_bpb", "test bits per byte", False, "test_bpb"),
})  # fmt: skip  # read-only: an evaluation set's readings are made by get_reading, never added here
LOG_COLUMNS = ("dev_ppl",)  # a reading of these is their natural log (cross-entropy from perplexity)


def reading_of_metric(metric: str) -> Optional[str]:
    """The reading a verdict judges a metric on (perplexity: its log, dev_ce); None for a metric no reading reads."""
    return next((r.name for r in READINGS.values() if r.column == metric), None)


@dataclass(frozen=True)
class Task:
    """What a sweep of one task reports and judges: every list a module keeps per task is a field here."""

    name: str
    readings: tuple[str, ...]  # the readings its claims may name; the report's header gives their seed noise
    default_readings: tuple[str, ...]  # a claim's readings unless it names its own
    versus: tuple[str, ...]  # the readings a row no claim covers is judged on against base (and the forest plot's)
    table: tuple[str, ...]  # the readings the reproduction table reads: the paper's (translation's), then its own
    final: tuple[str, ...]  # the result keys a finished trial reports to Tune (a diverged trial: each at its worst)
    curves: tuple[str, ...]  # the keys of an evaluation record a learning curve shows
    status: tuple[tuple[str, str], ...]  # (result key, heading) of the dev and test columns of `tsweep status`
    evaluation_sets: bool  # test and the named evaluation sets judged like dev (analysis.report.evalsets)


TASKS: Mapping[str, Task] = MappingProxyType({
    "translation": Task(
        "translation",
        readings=("dev_bleu", "dev_ce", "test_bleu"),
        default_readings=("dev_bleu", "dev_ce"),
        versus=("dev_bleu", "dev_ce"),
        table=("dev_bleu", "dev_ce", "test_bleu"),
        final=objectives("translation"),
        curves=("dev_ce", "dev_ppl", "dev_bleu"),
        status=(("dev_bleu", "dev BLEU"), ("test_bleu", "test BLEU")),
        evaluation_sets=True,
    ),
    "lm": Task(  # a decoder-only language model: perplexity and bits per byte, no BLEU
        "lm",
        readings=("dev_ce", "dev_bpb", "test_bpb"),
        default_readings=("dev_ce",),
        versus=("dev_bpb",),
        table=("dev_bleu", "dev_ce", "test_bleu", "dev_bpb", "test_bpb"),
        final=objectives("lm"),
        curves=("dev_ce", "dev_ppl", "dev_bpb"),
        status=(("dev_bpb", "dev bpb"), ("test_bpb", "test bpb")),
        evaluation_sets=False,
    ),
})  # fmt: skip
DEFAULT_TASK = "translation"  # a trial that records no task
QUALITY = TASKS[DEFAULT_TASK].default_readings  # a claim's readings unless it names its own
CLAIM_READINGS = tuple(dict.fromkeys(r for t in TASKS.values() for r in t.readings))  # a claim of any task may name
AT_EVAL = tuple(m.name for m in METRICS if m.at_eval)  # what a trial reports at an evaluation, over every task
CURVE_KEYS = tuple(dict.fromkeys(k for t in TASKS.values() for k in t.curves))  # a learning curve's keys, every task


def for_task(name: Optional[str]) -> Task:
    """The registry's record of a task (a name it does not know, or None: translation's)."""
    return TASKS.get(name or DEFAULT_TASK, TASKS[DEFAULT_TASK])


def sweep_task(frame) -> str:
    """The task of a sweep from a frame of its trials (analysis.data.collect: the ``task`` column, which a
    translation trial leaves empty): the first other task any trial names, else translation."""
    named = set(frame["task"]) if "task" in frame else set()
    return next((t for t in TASKS if t != DEFAULT_TASK and t in named), DEFAULT_TASK)


def final_report(result: Mapping) -> dict:
    """The scores a finished trial reports to Tune from its result.json: its task's ``final`` keys, each at its
    worst (0 for a score, inf for a cost) where the trial did not finish."""
    diverged = result.get("status") != "finished"
    worst = {"max": 0.0, "min": float("inf")}
    return {k: worst[BY_NAME[k].mode] if diverged else result[k] for k in for_task(result.get("task")).final}


@dataclass(frozen=True)
class SetMetric:
    """A metric every evaluation set is read on (analysis.report.evalsets): the frame's column ``SET:name``."""

    name: str
    label: str
    higher_is_better: bool
    from_dev: str  # the dev reading whose claims it re-judges on the set


SET_METRICS: Mapping[str, SetMetric] = MappingProxyType({
    "bleu": SetMetric("bleu", "BLEU", True, "dev_bleu"),
    "chrf": SetMetric("chrf", "chrF", True, "dev_bleu"),
    "ce": SetMetric("ce", "cross-entropy (nats, ln PPL)", False, "dev_ce"),
})  # fmt: skip


def set_reading(set_name: str, metric: str) -> str:
    """The name (and column) of a set's reading of one of SET_METRICS: ``SET:metric``."""
    if metric not in SET_METRICS:
        raise KeyError(metric)
    return f"{set_name}:{metric}"


@cache
def _set_reading(name: str) -> Optional[Reading]:
    set_name, sep, metric = name.rpartition(":")
    m = SET_METRICS.get(metric)
    if not (sep and set_name and m):
        return None
    return Reading(name, f"{set_name} {m.label}", m.higher_is_better, name)


def set_readings(set_name: str) -> tuple[Reading, ...]:
    """An evaluation set's readings, one per SET_METRICS entry, in its order."""
    return tuple(get_reading(set_reading(set_name, m)) for m in SET_METRICS)


def is_reading(name: str) -> bool:
    """Whether ``name`` is a reading: one of READINGS or an evaluation set's (``SET:metric``)."""
    return name in READINGS or _set_reading(name) is not None


def get_reading(name: str) -> Reading:
    """The reading of that name: one of READINGS, or an evaluation set's (``SET:metric``, made from SET_METRICS and
    read from the frame's column of the same name).  KeyError for any other name."""
    found = READINGS.get(name) or _set_reading(name)
    if found is None:
        raise KeyError(name)
    return found
