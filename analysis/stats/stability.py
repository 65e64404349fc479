""" "Unstable" as a decision with its error controlled over the report: did an effect change late in the budget?

A comparison's effect is flagged when the change of its estimated difference between a late evaluation point (at or
after ``UNSTABLE_FROM`` of the budget) and the end is itself decided: each seed's change of its reading (the value
at the point minus its final value, the same run: paired) is tested like a reading, with the report's noise model
(analysis.stats.seed_noise, moderated over every row's changes) and a two-sided t on the difference of two rows'
mean changes (analysis.stats.comparisons.compare); every such test the report makes (every comparison of every
claim-reading and row against base judged over the budget, at every late point) is one family, decided by
Benjamini-Hochberg at alpha (scipy).  Under no change anywhere a report then carries a flag with probability about alpha
or less, instead of the per-comparison chance summed over its comparisons (the flag before: an estimate outside the
final interval, in a third to a half of null reports).  A flag is about the effect's path, not the verdict: the verdict
stays the final point's.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

import numpy as np
import pandas as pd
from scipy import stats

from analysis.data.claims import Claim, as_claims, table3_claims

from .comparisons import Comparison, compare, reading_values
from .rule import ALPHA, Rule
from .seed_noise import Noise, pooled_noise

UNSTABLE_FROM = 0.5  # evaluation points from this fraction of the budget on are tested against the end


def changes(frames: dict[float, pd.DataFrame], readings: Iterable[str]) -> dict[float, dict[str, dict]]:
    """{late fraction: {reading: {row: each finished seed's value at that point minus its final value}}} from
    trajectory.points' frames (the final one, 1.0, among them; a trial is matched by its id; a seed without both
    values left out)."""
    final = frames.get(1.0)
    if final is None:
        return {}
    done = final[final["status"] == "finished"].set_index("trial_id")
    out: dict[float, dict[str, dict]] = {}
    for f, frame in frames.items():
        if f >= 1.0 or f < UNSTABLE_FROM:
            continue
        at = frame.set_index("trial_id")
        common = [t for t in at.index if t in done.index]
        out[f] = {}
        for reading in readings:
            d = (reading_values(at.loc[common], reading) - reading_values(done.loc[common], reading)).astype(float)
            rows = done.loc[common, "row"]
            out[f][reading] = {r: d[rows == r].dropna().to_numpy() for r in dict.fromkeys(rows)}
    return out


def flagged(delta: dict[float, dict[str, dict]], tested: Iterable[tuple[Hashable, Comparison]],
            alpha: float = ALPHA, control: bool = True) -> tuple[set, int]:  # fmt: skip
    """The keys of ``tested`` ((key, the final point's comparison) pairs: a claim-reading or a row against base)
    whose effect changed: a comparison's change between a late point and the end decided by BH at ``alpha`` over
    every comparison at every late point (``delta``: ``changes``).  ``control`` False: each change at alpha alone
    (the per-comparison rate, for measuring what the control does).  Returns (those keys, the changes tested)."""
    noise: dict[tuple, Noise] = {}
    keys, p = [], []
    for key, c in tested:
        for f, per in delta.items():
            values = per.get(c.reading)
            if not values or c.a not in values or c.b not in values:
                continue
            if (f, c.reading) not in noise:
                noise[(f, c.reading)] = pooled_noise(values)
            d = compare(values, noise[(f, c.reading)], c.a, ">", c.b, c.reading, rule=Rule())
            if math.isfinite(d.p):
                keys.append(key)
                p.append(d.p)
    if not p:
        return set(), 0
    decided = stats.false_discovery_control(p, method="bh") <= alpha if control else np.array(p) <= alpha
    return {k for k, hit in zip(keys, decided) if hit}, len(p)


def unstable_line(flagged: int, units: int, tests: int, alpha: float = ALPHA) -> str:
    """The header's line on the ⚠ flags: how many, and the control they are decided under."""
    if not units:
        return ""
    head = f"{flagged} of {units}" if flagged else f"none of {units}"
    return (f"**Unstable**: {head} claim-readings and rows against base are flagged ⚠: the change of an effect "
            f"between an evaluation point in the last half of the budget and the end is decided, by "
            f"Benjamini-Hochberg at α = {alpha} over the {tests} such changes the report tests (each seed's change, "
            f"paired; seed noise moderated as the verdicts'), so a report where no effect changes carries a flag at "
            f"most about {alpha:.0%} of the time. A flag asks for a look at the learning curves; the verdict is the "
            "final point's.")  # fmt: skip


def unstable_counts(claims: pd.DataFrame, versus: pd.DataFrame, all_claims: list[Claim] | None = None) -> dict:
    """{flagged, units, comparisons} of a report's tables (tables.judge_report's claims and rows against base):
    lines judged over the budget (with a trajectory), those flagged, and the comparisons they hold."""
    from_id = {c.id: len(c.comparisons) for c in as_claims(all_claims or table3_claims())}
    flagged = units = comparisons = 0
    for frame, per_line in ((claims, lambda r: from_id.get(r["claim"], 1)), (versus, lambda r: 1)):
        for _, r in frame.iterrows() if len(frame) and "trajectory" in frame else ():
            if "→" not in str(r["trajectory"]):
                continue
            units += 1
            flagged += bool(r["unstable"])
            comparisons += per_line(r)
    return {"flagged": flagged, "units": units, "comparisons": comparisons}
