"""Claim verdicts as statistics: the seed is the unit of replication, the report is the family.

This module settles each claim-reading from its comparisons and judges a table; the pieces live beside it: the
rule (rule.py), one comparison (comparisons.py), the family's procedure (family.py), the noise (seed_noise.py),
e-values (evalues.py), where more seeds could decide (adaptive_seeds.py).  The rule as a whole, in one place (the
report prints ``Rule.describe()`` and benchmarks/verdict_calibration.py measures it):

* **Noise** per reading (dev BLEU, dev cross-entropy = ln dev PPL, test BLEU, ...): seed_noise.py, moderated
  variances (an empirical-Bayes prior fitted to every row's seed variance, each row's shrunk toward it, never
  below its own), so two or three seeds per row are enough and one unstable row does not decide for the rest.
* **A comparison** of rows a and b: d = mean_a - mean_b, its standard error from the two rows' variances
  (Welch-Satterthwaite df, capped at what the table holds), a two-sided p; for "~" (about equal) two one-sided
  tests (TOST) against the claim's margin.  ``best:R1,R2`` is the row that scored best on the reading, its p
  multiplied by the k candidates (Bonferroni: it was picked after looking); a candidate without a finished trial
  makes the comparison missing (the claim is incomplete).  Adaptive seeds: p multiplied by the looks charged.
* **The family** (default): every comparison the report prints (every claim-reading on dev, test and each named
  evaluation set, every row judged against base), decided together by Benjamini-Hochberg at alpha (false
  discovery rate; under no real effect anywhere, the chance of any false decided comparison in the report) or
  Holm (family-wise): analysis.report.evalsets.report_rule finds the procedure's cutoff over that union
  (``Rule.cutoff``) and each table is decided at it.  ``family="claim"`` decides each
  claim-reading alone (Holm over its comparisons); the header names it when used.
* **Evidence** (``Rule.evidence``): "p" (default) decides on the p-values above; "e" on each comparison's e-value
  (analysis/stats/evalues.py: the safe t-test, '~' through a calibrator), decided by e-BH (BH on 1/e), valid under any
  dependence and, for the directional comparisons, under optional stopping: no looks are charged.
* **A claim-reading** is held when every comparison agrees (significant on the paper's side), contradicted when
  some contradict and none agree, mixed when both, within noise otherwise; incomplete when a row is missing,
  whatever the others say (a missing row could turn contradicted into mixed, within noise into held).  Diverged
  seeds are not in the means and are named and counted in the verdict.
* **No seed noise**: a comparison whose standard error is zero (every seed of the rows its noise comes from reads
  the same, as a quantised BLEU of 0.0 does) has no evidence either way: its outcome is "no seed noise: cannot
  decide", never agrees or contradicts, and a claim with such a comparison reads so (like a missing row).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property

import pandas as pd

from analysis.data.claims import Claim, as_claims
from analysis.data.metrics import for_task, sweep_task
from transformer_core.rundir import Status

from .comparisons import Comparison, Outcome, compare, detectable, seed_values
from .family import decide
from .rule import Rule
from .seed_noise import Noise, pooled_noise, table_noise


class Verdict(str, Enum):
    HELD = "held"
    CONTRADICTED = "contradicted"
    MIXED = "mixed"
    WITHIN_NOISE = "within noise"
    INCOMPLETE = "incomplete"
    NO_REPLICATES = "inconclusive: no seed replicates"
    NO_NOISE = "no seed noise: cannot decide"
    NOT_MEASURED = "not measured"

    @property
    def symbol(self) -> str:
        return {"held": "✓", "contradicted": "✗", "mixed": "±", "within noise": "≈"}.get(self.value, "?")

    @property
    def short(self) -> str:
        return {"held": "agrees", "contradicted": "contradicts"}.get(self.value, self.value.split(":")[0])


# ---------------------------------------------------------------------------------------------- claims
@dataclass
class ClaimResult:
    claim: str
    reading: str
    verdict: Verdict
    comparisons: list[Comparison]
    detail: str
    diverged: dict = field(default_factory=dict)  # row -> diverged seeds (not in the means)

    @cached_property
    def detectable(self) -> float:
        """The largest of its comparisons' detectable differences (nan where none was tested): solved when a table
        asks for it, not for every claim a simulation judges."""
        return max((detectable(c) for c in self.comparisons), default=float("nan"))


def claim_comparisons(claim: Claim, values: dict, noise: Noise, reading: str, rule: Rule = Rule()) -> list[Comparison]:
    claim = Claim.of(claim)
    return [compare(values, noise, a, rel, b, reading, claim.margin_for(reading), rule) for a, rel, b in
            claim.comparisons]  # fmt: skip


def settle(claim: Claim, reading: str, comps: list[Comparison], diverged: dict | None = None) -> ClaimResult:
    """The verdict from comparisons the family's procedure has decided.  Held when every comparison agrees,
    contradicted when some contradict and none agree, mixed when both; within noise otherwise; incomplete when
    a row (or a best-of candidate) has no finished trial, whatever the others say; "no seed noise: cannot decide"
    when a comparison has no noise estimate above zero (it could go either way), unless a row is missing."""
    outcomes = [c.outcome for c in comps]
    tested = [o for o in outcomes if o in (Outcome.AGREES, Outcome.CONTRADICTS, Outcome.WITHIN_NOISE)]
    agree, contra = outcomes.count(Outcome.AGREES), outcomes.count(Outcome.CONTRADICTS)
    if all(o == Outcome.MISSING for o in outcomes) and not any(c.na for c in comps):  # none of its own rows ran
        verdict = Verdict.NOT_MEASURED
    elif Outcome.MISSING in outcomes:
        verdict = Verdict.INCOMPLETE  # a claim is not judged on part of its rows: a missing one could agree
    elif Outcome.NO_NOISE in outcomes:
        verdict = Verdict.NO_NOISE  # nor on part of its comparisons: one without seed noise could go either way
    elif not tested:
        verdict = Verdict.NO_REPLICATES
    elif agree == len(comps):
        verdict = Verdict.HELD
    elif contra and not agree:
        verdict = Verdict.CONTRADICTED
    elif contra and agree:
        verdict = Verdict.MIXED
    else:
        verdict = Verdict.WITHIN_NOISE
    rows = {r for c in comps for r in (c.a, c.b, *c.candidates)}
    gone = {r: k for r, k in (diverged or {}).items() if k and r in rows}
    counts = ", ".join(f"{outcomes.count(o)} {o.value}" for o in Outcome if outcomes.count(o))
    detail = counts if len(comps) > 1 else outcomes[0].value
    if gone:
        detail += "; diverged seeds, not in the means: " + ", ".join(f"{r} {k}" for r, k in sorted(gone.items()))
    return ClaimResult(Claim.of(claim).id, reading, verdict, comps, detail, diverged=gone)


@dataclass
class Judgement:
    claims: list[ClaimResult]
    versus: dict[str, list[Comparison]]  # reading -> each row against base
    family: int = 0  # comparisons the procedure was applied to (with a p)


def judge(values: dict[str, dict], claims: list[Claim], rule: Rule = Rule(), versus_rows: Sequence[str] = (),
          diverged: dict | None = None, base: str = "base", versus_readings=None,
          noise: dict[str, Noise] | None = None) -> Judgement:  # fmt: skip
    """Every claim on every reading it has, and each of ``versus_rows`` against base on every reading in
    ``values`` ({reading: {row: seed values}}; ``versus_readings``, where given, of them), decided together
    (rule.family == "report") or claim by claim and reading by reading (rule.family == "claim").  ``values`` is
    one table (its readings scored by the same trials: ``seed_noise.table_noise``) unless ``noise`` gives each
    reading's model (several tables judged as one family: benchmarks.simulate)."""
    noise = noise or table_noise(values, rule.variance)
    per_claim = [(c, r, claim_comparisons(c, values[r], noise[r], r, rule)) for c in as_claims(claims)
                 for r in c.readings if r in values]  # fmt: skip
    vr = [r for r in values if versus_readings is None or r in versus_readings]
    versus = {r: _versus(values[r], noise[r], versus_rows, r, rule, base) for r in vr} if versus_rows else {}
    groups = [comps for _, _, comps in per_claim] + list(versus.values())
    if rule.family == "report":
        family = [c for g in groups for c in g]
        decide(family, rule)
    else:
        family = []
        for g in groups:
            decide(g, replace(rule, family="claim", method="holm", cutoff=None, size=0))
            family += g
    results = [settle(c, r, comps, diverged) for c, r, comps in per_claim]
    return Judgement(results, versus, sum(math.isfinite(c.threshold) for c in family))


def _versus(values: dict, noise: Noise, rows: Sequence[str], reading: str, rule: Rule, base: str) -> list[Comparison]:
    """Each row against base, two-sided (nothing predicted a direction): AGREES means better, CONTRADICTS worse."""
    return [compare(values, noise, r, ">", base, reading, rule=rule) for r in rows if r != base]


def judge_table(
    df: pd.DataFrame, claims: list[Claim], rule: Rule = Rule(), versus_rows: Sequence[str] = ()
) -> Judgement:
    """``judge`` on a collected frame: finished seeds per row and reading; diverged seeds counted."""
    claims = as_claims(claims)
    values = {r: seed_values(df, r) for r in table_readings(df, claims, versus_rows)}
    diverged = df[df["status"] == Status.DIVERGED].groupby("row").size().to_dict() if len(df) else {}
    return judge(values, claims, rule, versus_rows, diverged)


def table_readings(df: pd.DataFrame, claims: list[Claim], versus_rows: Sequence[str] = ()) -> list[str]:
    """The readings ``judge_table`` judges as one table: every claim's, then those rows are judged against base on."""
    return list(dict.fromkeys([r for c in as_claims(claims) for r in c.readings] + (
        list(for_task(sweep_task(df)).versus) if versus_rows else [])))  # fmt: skip


def frame_noise(df: pd.DataFrame, readings: Sequence[str], table: Sequence[str] = ()) -> dict[str, Noise]:
    """The seed-noise model of each of ``readings`` on a collected frame as the verdicts use it: the readings of
    ``table`` (``table_readings``: judged together) from ``seed_noise.table_noise`` over that table, the others
    each alone."""
    together = table_noise({r: seed_values(df, r) for r in table}) if table else {}
    return {r: together[r] if r in together else pooled_noise(seed_values(df, r)) for r in readings}


def versus_base(values: dict, noise: Noise, rows: list[str], reading: str, rule: Rule = Rule(),
                base: str = "base") -> list[Comparison]:  # fmt: skip
    """Each row against base on one reading, decided with the rule's procedure over these rows alone."""
    comps = _versus(values, noise, rows, reading, rule, base)
    decide(comps, rule)
    return comps
