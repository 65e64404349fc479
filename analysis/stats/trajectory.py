"""Verdicts over the training budget, and the undertrained-regime flag.

Every trial logs evaluations in metrics.jsonl.  At each fraction of the budget that every finished
trial shares (e.g. 1/3, 2/3, 1 of the steps) the claims are judged again on the values of that point,
so a verdict carries its trajectory.  Intermediate points may lack BLEU (``eval_bleu: final`` decodes
only at the end); there the BLEU reading is "not measured" and the cross-entropy reading carries on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.data.claims import Claim
from analysis.data.collect import metrics_lines, metrics_record
from transformer_core import rundir
from transformer_core.rundir import Status

from .comparisons import Comparison
from .rule import Rule
from .verdicts import Judgement, Verdict, judge_table

# The base's dev cross-entropy still falling by more than this over the last third of training
# (0.05 nats: perplexity still dropping by ~5%) marks the table as measured in an undertrained regime.
REGIME_DROP_NATS = 0.05
UNSTABLE_FROM = 0.5  # estimates from this fraction of the budget on are checked against the final interval


def eval_records(workdir: str | Path) -> list[dict]:
    path = Path(workdir) / rundir.METRICS
    if not path.exists():
        return []
    out = []
    for line in metrics_lines(path):
        rec = metrics_record(line)
        if rec is not None and rec.get("kind") == "eval":
            out.append(rec)
    return out


def _fraction(step: int, steps) -> float | None:
    try:
        return round(float(step) / float(steps), 3)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def points(df: pd.DataFrame) -> dict[float, pd.DataFrame]:
    """{fraction: frame like df with that evaluation's dev_bleu/dev_ppl}, fractions shared by all finished trials.

    The final point (1.0) is df itself (result.json: full dev set, final numbers)."""
    fin = df[df["status"] == Status.FINISHED]
    per_trial: dict[str, dict[float, dict]] = {}
    for _, r in fin.iterrows():
        recs = {}
        for e in eval_records(r["workdir"]):
            f = _fraction(e["step"], e.get("steps") or r.get("steps"))
            if f is not None and f < 1.0:
                recs[f] = e
        per_trial[r["trial_id"]] = recs
    shared = set.intersection(*(set(v) for v in per_trial.values())) if per_trial else set()
    out = {}
    for f in sorted(shared):
        frame = fin.copy()
        frame["dev_bleu"] = [per_trial[t][f].get("dev_bleu") for t in frame["trial_id"]]
        frame["dev_ppl"] = [per_trial[t][f].get("dev_ppl") for t in frame["trial_id"]]
        frame["dev_bpb"] = [per_trial[t][f].get("dev_bpb") for t in frame["trial_id"]]  # task lm (else None)
        frame["test_bleu"] = np.nan
        out[f] = frame
    out[1.0] = df
    return out


def trajectories(df: pd.DataFrame, claims: list[Claim], rule: Rule = Rule(), versus_rows: Sequence[str] = (),
                 pts: dict[float, pd.DataFrame] | None = None):  # fmt: skip
    """(final Judgement, {(claim, reading): [(fraction, ClaimResult)]}, {(row, reading): [(fraction, Comparison)]})
    with the final point last; every point is judged with the same rule (its own family).  ``pts`` is
    points(df) where the caller has it already."""
    traj: dict[tuple, list] = {}
    vtraj: dict[tuple, list] = {}
    final: Judgement | None = None
    for f, frame in (points(df) if pts is None else pts).items():
        j = judge_table(frame, claims, rule, versus_rows)
        for r in j.claims:
            traj.setdefault((r.claim, r.reading), []).append((f, r))
        for reading, comps in j.versus.items():
            if not any(c.na for c in comps):
                continue  # not measured at this point (BLEU only at the end)
            for c in comps:
                vtraj.setdefault((c.a, reading), []).append((f, c))
        final = j
    return final, traj, vtraj


def unstable(path: list[tuple[float, object]]) -> bool:
    """The estimated effect moved: an estimate from the last half of the budget lies outside the final interval
    of the same comparison (so it also changed sign whenever that interval excludes 0).  Judged on effects, not
    on significance: a constant effect near the threshold crossing it back and forth is not flagged.  ``path``
    holds ClaimResults (any of their comparisons) or Comparisons."""
    if len(path) < 2:
        return False
    finals = _comparisons(path[-1][1])
    for f, earlier in path[:-1]:
        if f < UNSTABLE_FROM:
            continue
        for now, then in zip(finals, _comparisons(earlier)):
            lo, hi = now.ci
            if math.isfinite(lo) and math.isfinite(then.diff) and not lo <= then.diff <= hi:
                return True
    return False


def _comparisons(x) -> list[Comparison]:
    return [x] if isinstance(x, Comparison) else list(x.comparisons)


def trajectory_text(path: list[tuple[float, Any]]) -> str:
    """The verdict at each point: "1/3 within noise → 2/3 agrees → 1 agrees"."""
    verdicts = [(f, getattr(r, "verdict", r)) for f, r in path]
    return " → ".join(f"{frac_label(f)} {'·' if v == Verdict.NOT_MEASURED else v.short}" for f, v in verdicts)


def frac_label(f: float) -> str:
    for num, den in ((1, 3), (2, 3), (1, 2), (1, 4), (3, 4)):
        if abs(f - num / den) < 0.01:
            return f"{num}/{den}"
    return "1" if f == 1.0 else f"{f:.2f}"


def regime(df: pd.DataFrame, base: str = "base", pts: dict[float, pd.DataFrame] | None = None) -> dict:
    """Is the base still improving fast at the end?  Mean over base seeds of ln dev PPL at ~2/3 vs the end.
    ``pts`` is points(df) where the caller has it already."""
    pts = points(df) if pts is None else pts
    inner = [f for f in pts if f < 1.0]
    rows = df[(df["row"] == base) & (df["status"] == Status.FINISHED)]
    if not inner or not len(rows):
        return {"measured": False, "undertrained": None, "detail": "no intermediate evaluation of the base row"}
    f = min(inner, key=lambda x: abs(x - 2 / 3))
    end = float(np.log(pd.to_numeric(rows["dev_ppl"])).mean())
    mid_rows = pts[f][pts[f]["row"] == base]
    mid = float(np.log(pd.to_numeric(mid_rows["dev_ppl"])).mean())
    drop = mid - end
    under = bool(math.isfinite(drop) and drop > REGIME_DROP_NATS)
    detail = (
        f"base dev cross-entropy {mid:.3f} at {frac_label(f)} of the steps, {end:.3f} at the end: "
        f"fell {drop:.3f} nats over the last third (threshold {REGIME_DROP_NATS})"
    )
    return {"measured": True, "undertrained": under, "drop": drop, "fraction": f, "detail": detail}
