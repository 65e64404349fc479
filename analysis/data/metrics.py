"""The metric registry: every score a trial reports, and every reading a verdict judges, declared once.

A ``Metric`` is a key of result.json (and, where ``at_eval``, of each evaluation record in metrics.jsonl, which the
trial reports to Tune as it trains): its label, direction, unit, the tasks that report it and whether a spec may
optimise it (``metric:``, ``search.objectives``).  A ``Reading`` is what the verdicts test, read from a column of
the collected frame (``dev_ce`` is ln ``dev_ppl``).  Read by the spec (objectives and their default mode), the
collector (the result keys it reads as numbers), the trial (what it reports at an evaluation), the claims (which
readings a task's claims may name) and the verdicts (direction and label of each reading).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    for task in ("translation", "lm"):
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


READINGS = {
    "dev_bleu": Reading("dev_bleu", "dev BLEU", True, "dev_bleu"),
    "dev_ce": Reading("dev_ce", "dev cross-entropy (nats, ln PPL)", False, "dev_ppl"),
    "test_bleu": Reading("test_bleu", "test BLEU", True, "test_bleu"),
    "dev_bpb": Reading("dev_bpb", "dev bits per byte", False, "dev_bpb"),  # task lm
    "test_bpb": Reading("test_bpb", "test bits per byte", False, "test_bpb"),
}
LOG_COLUMNS = ("dev_ppl",)  # a reading of these is their natural log (cross-entropy from perplexity)
QUALITY = ("dev_bleu", "dev_ce")  # a claim's readings unless it names its own
TASK_READINGS = {"translation": ("dev_bleu", "dev_ce", "test_bleu"), "lm": ("dev_ce", "dev_bpb", "test_bpb")}
DEFAULT_READINGS = {"translation": QUALITY, "lm": ("dev_ce",)}
