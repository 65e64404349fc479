"""Read what a sweep left on disk into one tidy DataFrame: one row per trial."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import pandas as pd

from transformer_core import rundir
from transformer_core.errors import UserError
from transformer_core.knobs import KNOBS, SCALED_BY_PROFILE
from transformer_core.rundir import Status

from .samples import CONFIRM_GROUP, SEARCH_GROUP, sample_label

log = logging.getLogger(__name__)

PAPER_KNOBS = SCALED_BY_PROFILE  # recorded in the paper's units by the spec (trial.json "paper")
RUN_KNOBS = tuple(k.name for k in KNOBS if k.where != "spec" and k.name != "seed")  # as run ("values")
METRICS = (
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
)


class Corrupt(dict):
    """An unreadable state file: empty, with the file's name for the trial's status."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name


def _read_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return Corrupt(path.name)
    return value if isinstance(value, dict) else Corrupt(path.name)


def _record(raw, trial_id: str) -> Optional[rundir.TrialRecord]:
    try:
        return rundir.TrialRecord.from_json(raw, trial_id) if raw and not isinstance(raw, Corrupt) else None
    except (TypeError, ValueError):
        return None


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
    state = _read_json(sweep_dir / "sweep.json")
    if isinstance(state, Corrupt):
        raise UserError(
            f"sweep.json in {str(sweep_dir)!r} is unreadable (truncated or not JSON): restore it or start anew"
        )
    if not state:
        raise UserError(f"{str(sweep_dir)!r} is not a sweep directory (no sweep.json): give the --out of 'tsweep run'")
    plan = state.get("plan") or {}
    ids = list(state.get("trials") or [])
    # a search's trials are not planned ahead: each wrote its trial.json when it started
    ids += sorted(p.name for p in (sweep_dir / "trials").glob("*") if p.name not in ids and p.name not in plan)
    summary = _read_json(sweep_dir / "tune_summary.json")
    records = []
    for tid in ids:
        wd = sweep_dir / "trials" / tid
        raw, result = _read_json(wd / rundir.TRIAL), _read_json(wd / rundir.RESULT)
        corrupt = [x.name for x in (raw, result) if isinstance(x, Corrupt)]
        record = _record(raw, tid)
        trial = record or _record(plan.get(tid), tid)  # never started: the plan says what it is
        if trial is None:  # not planned and no readable trial.json: not a trial of this sweep
            log.warning("%s: no readable %s and not in sweep.json's plan: left out", wd, rundir.TRIAL)
            continue
        if raw and not isinstance(raw, Corrupt) and record is None:
            corrupt = corrupt or [rundir.TRIAL]
        attempts, started = _attempts(wd / rundir.ATTEMPTS)
        err = (summary.get(tid) or {}).get("error")
        status = f"corrupt: {corrupt[0]}" if corrupt else result.get("status")
        if not status:  # stopped early only where the scheduler said so; started, no result, driver gone: interrupted
            status = (
                Status.FAILED
                if err
                else Status.STOPPED
                if (summary.get(tid) or {}).get("stopped_early")
                else (Status.RUNNING if state.get("status", "running") == "running" else Status.INTERRUPTED)
                if attempts
                else Status.PENDING
            )
            status = status.value
        step, last_eval = _progress(wd / rundir.METRICS)
        sample = sample_label(trial.search) if trial.search else None  # a search sample: a row of its own
        sample = sample or (trial.row if trial.group == CONFIRM_GROUP else None)  # a confirmation: its sample's row
        rec = {
            "trial_id": tid,
            "group": (trial.group if trial.group == CONFIRM_GROUP else SEARCH_GROUP) if sample else trial.group,
            "row": sample or trial.row,
            "seed": trial.seed,
            "sample": sample,
            "sampled": trial.search,  # the sampled knobs as the spec names them (paper units for paper knobs)
            "started": started,
            "profile": state.get("profile"),
            "status": status,
            "workdir": str(wd),
            "attempts": attempts,
            "step": result.get("steps", step),
            "error": err,
        }
        rec.update({f"paper_{k}": trial.paper.get(k) for k in PAPER_KNOBS})
        rec.update({k: trial.values.get(k) for k in RUN_KNOBS})
        rec.update({k: result.get(k) for k in METRICS})
        if not result:  # metrics so far
            rec.update(dev_bleu=last_eval.get("dev_bleu"), dev_ppl=last_eval.get("dev_ppl"))
            rec.update(dev_bpb=last_eval.get("dev_bpb"))
        records.append(rec)
    return pd.DataFrame.from_records(records)


def _attempts(path: Path) -> tuple[int, Optional[float]]:
    """How many times a trial was started or resumed, and when it first started (epoch seconds)."""
    if not path.exists():
        return 0, None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    try:
        first = json.loads(lines[0]).get("time") if lines else None
    except (json.JSONDecodeError, AttributeError):
        first = None
    return len(lines), first if isinstance(first, (int, float)) else None


def _progress(metrics_path: Path) -> tuple[int, dict]:
    """Last logged step and last evaluation of a trial's metrics.jsonl."""
    step, last = 0, {}
    if metrics_path.exists():
        for line in metrics_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash or a full disk
            step = max(step, rec.get("step", 0))
            if rec.get("kind") == "eval":
                last = rec
    return step, last


def dev_curves(df: pd.DataFrame, key: str = "dev_ppl") -> dict[str, list[tuple[int, float]]]:
    """One dev metric per evaluation step for every trial (from metrics.jsonl; points without it skipped)."""
    from .trajectory import eval_records

    curves = {}
    for _, r in df.iterrows():
        pts = [(e["step"], e[key]) for e in eval_records(r["workdir"]) if e.get(key) is not None]
        if pts:
            curves[r["trial_id"]] = pts
    return curves
