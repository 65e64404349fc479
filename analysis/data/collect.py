"""Read what a sweep left on disk into one tidy DataFrame: one row per trial."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Optional

import pandas as pd

from transformer_core import knobs, rundir
from transformer_core.rundir import SAFE_NAME, Status, loads

from .files import METRICS_BYTES, read_json, read_text
from .metrics import BY_NAME
from .samples import CONFIRM_GROUP, SEARCH_GROUP, sample_label
from .sweep_record import require_record
from .text import printable

log = logging.getLogger(__name__)


def paper_knobs() -> tuple[str, ...]:
    """Recorded in the paper's units by the spec (trial.json "paper"); the knob table as it is now."""
    return knobs.scaled_by_profile()


def run_knobs() -> tuple[str, ...]:
    """As run (trial.json "values"); the knob table as it is now."""
    return tuple(k.name for k in knobs.KNOBS if k.where != "spec" and k.name != "seed")


RESULT_KEYS = (  # what is read of result.json, in the frame's column order (every registered metric among them)
    "dev_bleu",
    "dev_ppl",
    "test_bleu",
    "test_ppl",
    "params",
    "target_tokens",
    "train_flops",
    "wall_seconds",
    "tokens_per_second",
    "device",
    "precision",
    "compile",  # as the step ran (auto resolved; eager where no C++ compiler was found)
    "fused_adam",
    "fast_dropout",
    "loss_kernel",  # the output projection and loss: plain, or chunked (transformer_core/fused_loss.py)
    "packing",  # as the step ran: off (padded), or the packed step's attention (varlen, mask)
    "corpus_fingerprint",
    "sacrebleu_signature",
    "torch_version",
    "reason",
    "schedule",
    "eval_fraction",
    "dev_chrf",
    "test_chrf",
    "chrf_signature",
    "session_seconds",
    "time_split",
    "dev_bpb",  # task lm: bits per byte (and no BLEU)
    "test_bpb",
    "peak_rss_gb",  # the trial's (last session's) peak resident memory; peak_cuda_gb on a GPU
    "peak_cuda_gb",
    "faults",  # each failure of the trial's worker that the driver retried ("killed: out of memory at 10.6 GB")
)
NUMBERS = frozenset((*BY_NAME, "params", "target_tokens", "train_flops", "wall_seconds", "tokens_per_second",
                     "eval_fraction", "session_seconds", "peak_rss_gb", "peak_cuda_gb"))  # fmt: skip
TEXTS = frozenset(("device", "precision", "compile", "loss_kernel", "packing", "corpus_fingerprint",
                   "sacrebleu_signature", "torch_version", "reason", "schedule", "chrf_signature"))  # fmt: skip


def columns() -> tuple[str, ...]:
    """The frame's columns, also when the sweep has no trial yet."""
    head = ("trial_id", "group", "row", "seed", "sample", "sampled", "started", "profile", "status", "workdir",
            "attempts", "step", "error")  # fmt: skip
    return tuple(dict.fromkeys((*head, *(f"paper_{k}" for k in paper_knobs()), *run_knobs(), *RESULT_KEYS)))


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class Corrupt(dict):
    """An unreadable state file: empty, with the file's name for the trial's status."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name


def _read_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        value = read_json(path)
    except (ValueError, OSError):
        return Corrupt(path.name)
    return value if isinstance(value, dict) else Corrupt(path.name)


def _scalar(x) -> bool:
    return x is None or isinstance(x, (str, int, float, bool))


def _record(raw, trial_id: str) -> Optional[rundir.TrialRecord]:
    """The trial record of ``raw`` (trial.json or a plan entry), None where it is missing or malformed: another
    trial's id, a row or group that is not a name, knobs that are not objects, sampled values that are not
    JSON scalars."""
    try:
        r = rundir.TrialRecord.from_json(raw, trial_id) if raw and not isinstance(raw, Corrupt) else None
    except (TypeError, ValueError):
        return None
    if r is None or r.id != trial_id or not isinstance(r.row, str) or not isinstance(r.group, (str, type(None))):
        return None
    if isinstance(r.seed, bool) or not isinstance(r.paper, dict):
        return None
    if r.search is not None and (not isinstance(r.search, dict) or not all(map(_scalar, r.search.values()))):
        return None
    return r


LARGEST = 1e30  # no reading, count, time or FLOPs of a trial comes near it; 1e308 would overflow the report's sums


def _in_range(x) -> bool:
    """A number result.json may hold: finite and at most LARGEST in size (NaN, Infinity and 1e308
    are not readings)."""
    return _number(x) and abs(x) <= LARGEST  # NaN fails the comparison


def _result(result: dict) -> dict:
    """result.json's readings, or Corrupt where a status, step or reading has the wrong type (a number as a string,
    a status that is not a name) or is no finite number of a sane size (NaN, Infinity, 1e308: ``_in_range``)."""
    if isinstance(result, Corrupt) or not result:
        return result
    bad = [k for k in NUMBERS if result.get(k) is not None and not _in_range(result[k])]
    steps = result.get("steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool)):
        bad.append("steps")
    if not isinstance(result.get("status"), (str, type(None))):
        bad.append("status")
    if bad:
        log.warning("%s: %s not of the right type or range: the trial is shown as corrupt", rundir.RESULT,
                    ", ".join(bad))  # fmt: skip
        return Corrupt(rundir.RESULT)
    faults = result.get("faults")
    faults = "; ".join(printable(x) for x in faults if isinstance(x, str)) if isinstance(faults, list) else None
    texts = {k: printable(result[k]) if isinstance(result[k], str) else None for k in TEXTS if k in result}
    return {**result, **texts, "faults": faults or None}


def _trial_ids(sweep_dir: Path, listed: tuple, plan: Mapping) -> list[str]:
    """The trials of the sweep's own plan (sweep.json), then the directories a search's trials made (a search's
    trials are not planned ahead: each wrote its trial.json when it started).  An id that is not a plain name
    (``../x``, a terminal escape) is left out, and so is a directory that is not a search trial of its own
    name (a copied trial directory, a stray folder)."""
    ids, seen, stray = [], set(), []
    trials = (sweep_dir / "trials").resolve()
    for tid in listed:
        if not isinstance(tid, str) or not SAFE_NAME.match(tid):
            log.warning("sweep.json lists the trial id %s, not a plain name: left out", ascii(tid))
        elif tid not in seen:
            ids.append(tid)
            seen.add(tid)
    for p in sorted((sweep_dir / "trials").glob("*")):
        if p.name in seen or p.name in plan:
            continue
        record = _record(_read_json(p / rundir.TRIAL), p.name) if SAFE_NAME.match(p.name) else None
        if record is None or record.search is None:  # not a searcher's sample of this name (a copy is another's)
            stray.append(p.name)
            continue
        ids.append(p.name)
    if stray:
        log.warning("%d entries of %s are not trials of this sweep's plan or search: left out (%s%s)", len(stray),
                    ascii(str(sweep_dir / "trials")), ", ".join(ascii(n) for n in stray[:3]),
                    ", ..." if len(stray) > 3 else "")  # fmt: skip
    inside = [t for t in ids if (sweep_dir / "trials" / t).resolve().parent == trials]
    if len(inside) < len(ids):  # a trial directory that is a link out of the sweep: another sweep's, say
        log.warning("trial directories that lead out of %s left out: %s", ascii(str(trials)),
                    ", ".join(ascii(t) for t in ids if t not in inside))  # fmt: skip
    return inside


def precisions(trials: pd.DataFrame) -> str:
    """The precision the trials ran at; where they differ (``precision=auto`` is decided in each trial's process),
    each precision with its trial count, so that a mixed sweep says so."""
    if "precision" not in trials or not trials["precision"].notna().any():
        return ""
    counts = trials["precision"].dropna().value_counts()
    if len(counts) == 1:
        return str(counts.index[0])
    return "mixed precision: " + ", ".join(f"{p} {n} trial{'s' * (n != 1)}" for p, n in sorted(counts.items()))


def collect(sweep_dir: str | Path) -> pd.DataFrame:
    """Every trial of the sweep, finished or not (status pending/running/stopped/diverged/finished)."""
    sweep_dir = Path(sweep_dir).resolve()  # a local path (the CLI pulls a URI sweep to a view); workdirs absolute
    sweep = require_record(sweep_dir)  # one line where it is missing, unreadable or of the wrong shape
    plan = sweep.plan
    summary = _read_json(sweep_dir / "tune_summary.json")
    records = []
    in_paper_units, in_run_units = paper_knobs(), run_knobs()
    for tid in _trial_ids(sweep_dir, sweep.trials, plan):
        wd = sweep_dir / "trials" / tid
        raw, result = _read_json(wd / rundir.TRIAL), _result(_read_json(wd / rundir.RESULT))
        corrupt = [x.name for x in (raw, result) if isinstance(x, Corrupt)]
        record = _record(raw, tid)
        trial = record or _record(plan.get(tid), tid)  # never started: the plan says what it is
        if trial is None:  # not planned and no readable trial.json: not a trial of this sweep
            log.warning("%s: no readable %s and not in sweep.json's plan: left out", wd, rundir.TRIAL)
            continue
        if raw and not isinstance(raw, Corrupt) and record is None:
            corrupt = corrupt or [rundir.TRIAL]
        attempts, started = _attempts(wd / rundir.ATTEMPTS)
        got = summary.get(tid)
        entry = got if isinstance(got, dict) else {}
        err = printable(entry["error"]) if entry.get("error") else None
        status = f"corrupt: {corrupt[0]}" if corrupt else result.get("status")
        if not status:  # stopped early only where the scheduler said so; started, no result, driver gone: interrupted
            status = (
                Status.FAILED
                if err
                else Status.STOPPED
                if entry.get("stopped_early")
                else (Status.RUNNING if sweep.get("status", "running") == "running" else Status.INTERRUPTED)
                if attempts
                else Status.PENDING
            )
            status = status.value
        step, last_eval = _progress(wd / rundir.METRICS)
        sample = sample_label(trial.search) if trial.search else None  # a search sample: a row of its own
        sample = sample or (trial.row if trial.group == CONFIRM_GROUP else None)  # a confirmation: its sample's row
        rec = {
            "trial_id": tid,
            "group": (trial.group if trial.group == CONFIRM_GROUP else SEARCH_GROUP) if sample else _name(trial.group),
            "row": sample or printable(trial.row),
            "seed": trial.seed,
            "sample": sample,
            "sampled": trial.search,  # the sampled knobs as the spec names them (paper units for paper knobs)
            "started": started,
            "profile": printable(sweep.profile) if sweep.profile else None,
            "status": printable(status),
            "workdir": str(wd),
            "attempts": attempts,
            "step": result.get("steps", step),
            "error": err,
        }
        rec.update({f"paper_{k}": trial.paper.get(k) if _scalar(trial.paper.get(k)) else None for k in in_paper_units})
        rec.update({k: trial.values.get(k) if _scalar(trial.values.get(k)) else None for k in in_run_units})
        rec.update({k: result.get(k) for k in RESULT_KEYS})
        if not result:  # metrics so far
            rec.update(dev_bleu=last_eval.get("dev_bleu"), dev_ppl=last_eval.get("dev_ppl"))
            rec.update(dev_bpb=last_eval.get("dev_bpb"))
        records.append(rec)
    return pd.DataFrame.from_records(records, columns=columns())


def _name(group) -> Optional[str]:
    return printable(group) if isinstance(group, str) else None


def _attempts(path: Path) -> tuple[int, Optional[float]]:
    """How many times a trial was started or resumed, and when it first started (epoch seconds)."""
    if not path.exists():
        return 0, None
    try:
        lines = read_text(path).splitlines()
    except OSError:
        return 0, None
    try:
        first = loads(lines[0]).get("time") if lines else None
    except (ValueError, AttributeError):
        first = None
    return len(lines), first if isinstance(first, (int, float)) else None


def metrics_record(line: str) -> dict | None:
    """One line of metrics.jsonl as a record, or None where it is not one (a line cut by a crash, a value that is
    not an object, a step that is not a non-negative integer); readings that are not numbers are left out."""
    try:
        rec = loads(line)
    except ValueError:
        return None
    step = rec.get("step", 0) if isinstance(rec, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return None
    return {
        k: v for k, v in rec.items() if _number(v) or v is None or (k in ("kind", "signature") and isinstance(v, str))
    }


def metrics_lines(path: Path) -> list[str]:
    """The lines of a metrics.jsonl (none where it is not a regular file within METRICS_BYTES)."""
    try:
        return read_text(path, METRICS_BYTES).splitlines()
    except OSError as exc:
        log.warning("%s: %s: its progress is not read", ascii(str(path)), exc.strerror or exc)
        return []


def _progress(metrics_path: Path) -> tuple[int, dict]:
    """Last logged step and last evaluation of a trial's metrics.jsonl."""
    step, last = 0, {}
    if metrics_path.exists():
        for line in metrics_lines(metrics_path):
            rec = metrics_record(line)
            if rec is None:
                continue  # a line cut by a crash or a full disk, or not a record
            step = max(step, rec.get("step", 0))
            if rec.get("kind") == "eval":
                last = rec
    return step, last
