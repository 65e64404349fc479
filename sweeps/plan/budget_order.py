"""A budget spent claim by claim: which rows to run first when a sweep cannot finish within its budget.

A claim of the paper (analysis.data.claims) is judged only when every row it compares has its seeds, so the hour
goes furthest when it completes claims one after another, cheapest first: each step takes the claim whose
missing rows cost the least per claim they complete (a row already complete costs nothing, so base, which
most claims compare against, is paid for once), and runs those rows before anything else.  Within a step
the claims it completes are finished smallest first (A-too-many-heads before A-one-head, whose rows include
it).  Rows that no claim needs go last.

Pure functions on plain tables: a cost is the estimated seconds of a row's (or trial's) missing training,
from the plan's FLOPs and a measured throughput, corrected by the trials already measured
(``corrected_seconds``); ``schedule`` and ``project`` say what a budget reaches when trials are started
in that order on ``slots`` parallel slots, each trial on the first slot that frees up (as Ray Tune starts
a round's trials in the order given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Step:
    """Rows to run next and the claims that are complete once they have run."""

    claims: tuple[str, ...]
    rows: tuple[str, ...]
    seconds: float  # estimated cost of ``rows`` (trial-seconds, not wall time)


def _missing(rows: list[str], done: set[str]) -> list[str]:
    return [r for r in rows if r not in done]


def _pick(candidates: list[str], claims: dict, cost: dict, done: set, per_claim: bool) -> tuple[str, list[str]]:
    """The claim to complete next among ``candidates`` and the claims its missing rows complete with it.

    Ranked by cost per completed claim (``per_claim``) or by cost, then by the claims completed (more
    first), then by the claims' order in ``claims`` (the paper's)."""
    best: Optional[tuple[tuple[float, int, int], str, list[str]]] = None
    for i, c in enumerate(candidates):
        rows = _missing(claims[c], done)
        seconds = sum(cost[r] for r in rows)
        with_it = [d for d in candidates if set(_missing(claims[d], done)) <= set(rows)]
        key = (seconds / len(with_it) if per_claim else seconds, -len(with_it), i)
        if best is None or key < best[0]:
            best = (key, c, with_it)
    if best is None:
        raise ValueError("no claim to pick from")
    return best[1], best[2]


def order_claims(claims: dict[str, list[str]], cost: dict[str, float]) -> list[Step]:
    """Claims in the order the budget should complete them, each step with the rows it adds.

    ``claims``: {claim id: rows it compares}, in the paper's order; ``cost``: {row: estimated seconds of its
    missing trials}, 0 for a complete row.  A claim naming a row that ``cost`` lacks (a row the sweep does not
    plan) can never be complete and is left out.  Rows are listed in ``cost``'s order within a step."""
    todo = [c for c, rows in claims.items() if all(r in cost for r in rows)]
    done = {r for r, s in cost.items() if s <= 0}
    position = {r: i for i, r in enumerate(cost)}
    steps: list[Step] = []
    while todo:
        _, group = _pick(todo, claims, cost, done, per_claim=True)
        while group:  # inside the chosen group, the claims it completes smallest first
            c, with_it = _pick(group, claims, cost, done, per_claim=False)
            rows = sorted(_missing(claims[c], done), key=lambda r: position[r])  # every row is in cost
            steps.append(Step(tuple(with_it), tuple(rows), sum(cost[r] for r in rows)))
            done.update(rows)
            group = [d for d in group if d not in with_it]
            todo = [d for d in todo if d not in with_it]
    return steps


def row_order(steps: list[Step], rows: list[str]) -> list[str]:
    """Every row of ``rows``: those of the steps in step order, then the rest (no claim needs them, or they are
    complete) in their own order."""
    first = [r for s in steps for r in s.rows]
    return first + [r for r in rows if r not in first]


def corrected_seconds(
    estimated: dict[str, float], measured: dict[str, float], row_of: dict[str, str]
) -> dict[str, float]:
    """Each trial's estimate corrected by the trials measured so far: scaled by measured / estimated of its own
    row's measured trials where the row has some, else of all measured trials; unchanged when none is measured.

    ``estimated``: {trial: seconds} for every trial; ``measured``: {trial: seconds} of finished trials."""
    pairs = [(t, s) for t, s in measured.items() if t in estimated and estimated[t] > 0 and s > 0]

    def ratio(ts: list[tuple[str, float]]) -> float:
        return sum(s for _, s in ts) / sum(estimated[t] for t, _ in ts) if ts else 1.0

    overall = ratio(pairs)
    by_row: dict[str, list] = {}
    for t, s in pairs:
        by_row.setdefault(row_of[t], []).append((t, s))
    return {t: s * (ratio(by_row[row_of[t]]) if row_of[t] in by_row else overall) for t, s in estimated.items()}


def schedule(durations: list[tuple[str, float]], slots: int) -> dict[str, float]:
    """{trial: end time} when trials start in list order, each on the first slot that frees up."""
    free = [0.0] * max(1, slots)
    end = {}
    for trial, seconds in durations:
        i = free.index(min(free))
        free[i] += seconds
        end[trial] = free[i]
    return end


@dataclass
class Projection:
    """What a budget reaches, in the order of ``order_claims``: times are seconds from now."""

    claims: list[tuple[str, float]]  # (claim, time it is complete), in the order they complete
    rows: dict[str, float]  # row -> time its last missing trial ends (0 when complete)
    left: float  # the budget left (inf: none)
    decided: list[str] = field(default_factory=list)  # claims complete within ``left``
    unreached: dict[str, float] = field(default_factory=dict)  # the others: the time they would need
    rows_not_reached: list[str] = field(default_factory=list)  # rows not complete within ``left``


def project(
    steps: list[Step], claims: dict[str, list[str]], trials: list[tuple[str, str, float]], slots: int, left: float
) -> Projection:
    """Start ``trials`` [(trial, row, seconds still to run)] in order on ``slots`` slots: when each claim of
    ``steps`` would be complete (its last row's last trial ends; ``claims`` {claim: rows}), which are complete
    within ``left`` seconds, and which rows are not."""
    end = schedule([(t, s) for t, _, s in trials], slots)
    rows: dict[str, float] = {}
    for t, row, _ in trials:
        rows[row] = max(rows.get(row, 0.0), end[t])
    times = {c: max((rows.get(r, 0.0) for r in claims[c]), default=0.0) for s in steps for c in s.claims}
    order = sorted(times.items(), key=lambda kv: kv[1])
    p = Projection(order, rows, left)
    p.decided = [c for c, t in order if t <= left]
    p.unreached = {c: t for c, t in order if t > left}
    p.rows_not_reached = [r for r, t in rows.items() if t > left]
    return p


def budget_words(seconds: float) -> str:
    """A budget as `--budget` and DEMO_BUDGET take it, rounded up to 5 minutes: 55m, 1h35m, 3h."""
    if not math.isfinite(seconds):
        return "none"
    minutes = max(5, 5 * math.ceil(seconds / 300))
    h, m = divmod(minutes, 60)
    return f"{m}m" if not h else f"{h}h{m}m" if m else f"{h}h"
