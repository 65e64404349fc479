"""Claim verdicts as statistics: the seed is the unit of replication, the report is the family.

The rule, in one place (the report prints ``Rule.describe()`` and benchmarks/verdict_calibration.py measures it):

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

import numpy as np
import pandas as pd
from scipy import optimize, stats

from analysis.data.adaptive_record import AdaptiveRecord, StopReason, read_adaptive
from analysis.data.claims import CLAIMS, MARGINED, Claim, as_claims
from analysis.data.metrics import LOG_COLUMNS, for_task, get_reading, sweep_task
from transformer_core.rundir import Status

from .evalues import DESIGN_DELTA, calibrated, critical_t, guarded_evalue, uncalibrated
from .seed_noise import MIN_DF_SINGLE, MODELS, Noise, pooled_noise, standard_error, table_noise

ALPHA = 0.05


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


class Outcome(str, Enum):
    AGREES = "agrees"
    CONTRADICTS = "contradicts"
    WITHIN_NOISE = "within noise"
    NO_REPLICATES = "no replicates"
    NO_NOISE = "no seed noise: cannot decide"  # seeds replicated, but the noise estimate is zero (identical readings)
    MISSING = "missing"


# a comparison's standard error at or under this share of its rows' readings is taken as no seed noise at all (seeds
# that agree to the last digit, or to float rounding): nothing can be decided on it
ZERO_NOISE = 1e-9


def reading_values(df: pd.DataFrame, reading: str) -> pd.Series:
    r = get_reading(reading)
    v = pd.to_numeric(df[r.column], errors="coerce") if r.column in df else pd.Series(np.nan, index=df.index)
    return np.log(v) if r.column in LOG_COLUMNS else v


def seed_values(df: pd.DataFrame, reading: str) -> dict[str, np.ndarray]:
    """Finished seeds' values per row (NaN dropped)."""
    fin = df[df["status"] == Status.FINISHED]
    vals = reading_values(fin, reading)
    out = {}
    for row, idx in fin.groupby("row").groups.items():
        v = vals.loc[idx].to_numpy(dtype=float)
        out[row] = v[np.isfinite(v)]
    return out


def seed_correlation(df: pd.DataFrame, reading: str, base: str = "base") -> tuple[float, int]:
    """Correlation, over seeds, of a row's deviation from its mean with base's deviation at the same seed (pooled
    over rows): how much seed k's data order moves every row alike.  Returns (nan, pairs) when too few.  The
    count is of independent pairs: a row sharing n seeds with base gives n - 1 (its deviations sum to 0)."""
    fin = df[df["status"] == "finished"].assign(v=lambda d: reading_values(d, reading))
    fin = fin[np.isfinite(fin["v"])]
    b = fin[fin["row"] == base].set_index("seed")["v"]
    xs, ys, independent = [], [], 0
    for row, part in fin[fin["row"] != base].groupby("row"):
        common = [s for s in part["seed"] if s in b.index]
        if len(common) < 2:
            continue
        mine = part.set_index("seed").loc[common, "v"].to_numpy(dtype=float)
        theirs = b.loc[common].to_numpy(dtype=float)
        xs += list(theirs - theirs.mean())
        ys += list(mine - mine.mean())
        independent += len(common) - 1
    if independent < 4 or not (np.std(xs) > 0 and np.std(ys) > 0):  # no spread (quantised readings): no correlation
        return float("nan"), independent
    return float(np.corrcoef(xs, ys)[0, 1]), independent


# ---------------------------------------------------------------------------------------------- the rule
@dataclass(frozen=True)
class Rule:
    """How a report decides: the error rate, the looks charged, the family, its procedure, the noise model."""

    alpha: float = ALPHA
    looks: int = 1  # looks charged (adaptive seeds): each comparison is tested at alpha / looks
    family: str = "report"  # report: every claim-reading and row-vs-base of the report together; claim: each alone
    method: str = "bh"  # over the family: bh (Benjamini-Hochberg, the false discovery rate) or holm (family-wise)
    variance: str = "moderated"  # seed_noise.MODELS
    # the whole printed report's cutoff (family "report"): p at or under it is decided.  Set by
    # analysis.report.evalsets.report_rule from every comparison the report prints (dev, test, each named set, rows
    # against base): the procedure over that union rejects exactly p <= cutoff, so each table decided at it is
    # one family with the others.  None: the procedure runs over what judge() is given.
    cutoff: float | None = None
    size: int = 0  # comparisons with a p in the family the cutoff came from
    # what a comparison is decided on: "p" its p-value (BH / Holm), "e" its e-value (analysis/stats/evalues.py; the
    # procedure runs on 1/e: e-BH, or Holm on 1/e, valid under any dependence); with "e" the cutoff is on 1/e and
    # looks are not charged (the safe t-test's e-values are anytime-valid)
    evidence: str = "p"
    # the guard's prior df (evidence "e"; own_error): 0, each row's own variance floored at the noise model's (an
    # e-value whatever the two rows' sds: the report's); d > 0, each row's own variance shrunk toward the model's
    # with d prior df (an e-value only where row variances scatter as a scaled inverse chi-square on d df around
    # the model's); inf, no guard (the noise model's e-value alone).  Anything but 0 is for measuring what the
    # guard costs (benchmarks/evalue_ceiling.py): a 3x-spread row is not controlled by them
    guard_df: float = 0.0

    def __post_init__(self):
        if not self.guard_df >= 0:
            raise ValueError(f"rule: guard_df {self.guard_df!r}; allowed a number >= 0 (0 the report's, inf none)")
        if (self.family not in FAMILIES or self.method not in METHODS or self.variance not in MODELS
                or self.evidence not in EVIDENCE):  # fmt: skip
            raise ValueError(f"rule: family {self.family!r} / method {self.method!r} / variance {self.variance!r} / "
                             f"evidence {self.evidence!r}; allowed {sorted(FAMILIES)} / {sorted(METHODS)} / "
                             f"{list(MODELS)} / {sorted(EVIDENCE)}")  # fmt: skip

    def describe(self) -> str:
        if self.evidence == "e":
            return self._describe_e()
        looks = f", each comparison at α/{self.looks} for {self.looks} looks" if self.looks > 1 else ""
        if self.family == "claim":
            return (f"per claim: Holm over each claim-reading's comparisons at α = {self.alpha}{looks}; the report as "
                    "a whole has no error control (more claims, more false verdicts)")  # fmt: skip
        if self.cutoff is not None:
            return (f"{METHODS[self.method]} over the report's family, the whole printed report ({self.size} "
                    f"comparisons: every claim-reading on dev, test and each named evaluation set, and every row "
                    f"judged against base) at α = {self.alpha}{looks}: a comparison is decided where its p <= "
                    f"{self.cutoff:.2g}")  # fmt: skip
        return (f"{METHODS[self.method]} over the report's family (every claim-reading and every row judged against "
                f"base) at α = {self.alpha}{looks}")  # fmt: skip

    def _describe_e(self) -> str:
        how = (f"e-values (the safe t-test designed for {DESIGN_DELTA:g} seed sd, the smaller of the noise model's and "
               f"the two rows' own spread's; '~' by a calibrator from its p, not anytime-valid), decided by "
               f"{'e-BH' if self.method == 'bh' else 'Holm on 1/e'}")  # fmt: skip
        if self.guard_df:  # not the report's: the benchmark's measure of what the guard costs
            how += (" (no guard: the noise model's e-value alone)" if math.isinf(self.guard_df)
                    else f" (the guard's variances shrunk to the model's on {self.guard_df:g} prior df)")  # fmt: skip
        if self.family == "claim":
            return f"per claim: {how} over each claim-reading's comparisons at α = {self.alpha}, no looks charged"
        where = f": a comparison is decided where its e >= {1 / self.cutoff:.3g}" if self.cutoff else ""
        size = f" ({self.size} comparisons)" if self.cutoff is not None else ""
        return f"{how} over the report's family{size} at α = {self.alpha}, no looks charged{where}"


FAMILIES = {"report": "the whole report", "claim": "each claim-reading alone"}
EVIDENCE = {"p": "p-values", "e": "e-values (anytime-valid)"}
METHODS = {"bh": "Benjamini-Hochberg (false discovery rate)", "holm": "Holm (family-wise error rate)"}


# ---------------------------------------------------------------------------------------------- comparisons
@dataclass
class Comparison:
    a: str
    relation: str  # "<" a worse than b, ">" a better than b, "~" about equal (quality, whatever the reading)
    b: str
    reading: str
    margin: float | None = None
    outcome: Outcome = Outcome.MISSING
    diff: float = float("nan")  # mean_a - mean_b in the reading's units
    ci: tuple[float, float] = (float("nan"), float("nan"))
    p: float = float("nan")  # p-value before the family's procedure, corrected for best-of and for looks
    level: float = ALPHA  # the interval's level is 1 - level (two-sided; 1 - 2 level for '~')
    detail: str = ""
    candidates: tuple = field(default_factory=tuple)
    se: float = float("nan")
    dof: float = float("nan")
    threshold: float = float("nan")  # the p the family's procedure rejected at (or would reject the next at)
    factor: int = 1  # what p was multiplied by: best-of candidates x looks charged
    prob: float = float("nan")  # P(a better than b): the share of seed pairs where a's seed is better (ties half)
    na: int = 0
    nb: int = 0
    e: float = float("nan")  # the e-value (Rule.evidence "e"), divided by the best-of candidates
    # Rule.evidence "e": the guard's standard error and df (own_error: Welch on the two rows' own variances, each
    # floored at the noise model's; analysis/stats/evalues.py: guarded_evalue); nan where a row has one seed
    own_se: float = float("nan")
    own_dof: float = float("nan")
    own_var: tuple = ()  # each row's own seed variance (the guard's), for projecting it to more seeds
    guard_df: float = 0.0  # the guard's prior df (Rule.guard_df)
    decided_on: str = "p"  # what the family's procedure decides it on: Rule.evidence ("p" or "e")

    def evidence(self) -> str:
        """The comparison's own outcome and its numbers: what a reader checks the verdict against."""
        return f"{self.a} vs {self.b}: {self.outcome.value}" + (f" ({self.detail})" if self.detail else "")


def _resolve_best(name: str, values: dict, reading: str) -> tuple[str, tuple, list[str]]:
    """(row, candidates, missing candidates) of a 'best:R1,R2' name; a plain name has no candidates."""
    if not name.startswith("best:"):
        return name, (), []
    names = name[5:].split(",")
    cands = tuple(r for r in names if len(values.get(r, ())) > 0)
    missing = [r for r in names if r not in cands]
    if not cands:
        return names[0], tuple(names), missing
    sign = 1 if get_reading(reading).higher_is_better else -1
    return max(cands, key=lambda r: sign * values[r].mean()), cands, missing


def compare(values: dict, noise: Noise, a: str, relation: str, b: str, reading: str, margin: float | None = None,
            rule: Rule = Rule()) -> Comparison:  # fmt: skip
    """One comparison on one reading, before the family's procedure: its p (corrected for best-of selection and
    looks), the side it falls on, and its interval at 1 - level.  A best-of with a candidate missing is MISSING:
    the best cannot be named without every candidate."""
    b_name, cands, absent = _resolve_best(b, values, reading)
    c = Comparison(a, relation, b_name, reading, margin, candidates=cands)
    va, vb = values.get(a, np.array([])), values.get(b_name, np.array([]))
    c.na, c.nb = len(va), len(vb)
    factor = max(len(cands), 1) * (rule.looks if rule.evidence == "p" else 1)  # e-values: no looks charged
    c.level, c.factor, c.decided_on = rule.alpha / factor, factor, rule.evidence
    if not len(va) or not len(vb) or absent:
        c.detail = f"no finished trial of {', '.join(absent) if absent else a if not len(va) else b_name}"
        c.b = f"the best of {b[5:]}" if absent else c.b
        return c
    c.diff = float(va.mean() - vb.mean())
    c.prob = improvement(va, vb, reading)
    single = min(len(va), len(vb)) == 1
    if noise.df == 0 or (single and noise.df < MIN_DF_SINGLE):
        c.outcome = Outcome.NO_REPLICATES
        c.detail = f"{a} {va.mean():.3f} (n={len(va)}) vs {b_name} {vb.mean():.3f} (n={len(vb)}): no seed noise"
        return c
    c.se, c.dof = standard_error(noise, a, len(va), b_name, len(vb))
    if not c.se > ZERO_NOISE * max(abs(va.mean()), abs(vb.mean())):  # identical seeds everywhere: no evidence
        c.outcome, c.se = Outcome.NO_NOISE, float("nan")
        c.detail = (f"{a} {va.mean():.3f} (n={len(va)}) vs {b_name} {vb.mean():.3f} (n={len(vb)}): diff "
                    f"{c.diff:+.3g}, no seed noise (the seeds' readings agree exactly): cannot decide")  # fmt: skip
        return c
    t_crit = stats.t.ppf(1 - c.level if relation in MARGINED else 1 - c.level / 2, c.dof)
    c.ci = (c.diff - t_crit * c.se, c.diff + t_crit * c.se)
    sign = 1 if get_reading(reading).higher_is_better else -1  # quality = sign * value
    if relation == "~":
        c.p, agrees = _equivalence(c.diff, c.se, c.dof, margin)
    elif relation in MARGINED:  # '>=' a no worse than b by more than the margin, '<=' no better
        c.p, agrees = _noninferiority((sign if relation == ">=" else -sign) * c.diff, c.se, c.dof, margin)
    else:
        c.p = float(2 * stats.t.sf(abs(c.diff) / c.se, c.dof))
        better = sign * c.diff > 0
        agrees = better if relation == ">" else not better
    c.p = min(1.0, c.p * factor)
    if rule.evidence == "e":
        c.guard_df = rule.guard_df
        if has_guard(c):
            floor = (noise.spread(a)[0], noise.spread(b_name)[0])
            c.own_se, c.own_dof, c.own_var = own_error(va, vb, floor, c.guard_df)
        c.e = _evalue(c, relation) / (1 if relation in MARGINED else factor)
    c.outcome = Outcome.AGREES if agrees else Outcome.CONTRADICTS  # the side; the family's procedure decides
    pct = f"{100 * (1 - (2 if relation in MARGINED else 1) * c.level):.1f}%"
    c.detail = (
        f"{a} {va.mean():.3f} (n={len(va)}) vs {b_name} {vb.mean():.3f} (n={len(vb)}): diff {c.diff:+.3f}, "
        f"{pct} interval [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}], p {c.p:.2g}"
        + (f", margin ±{margin}" if relation == "~" else f", margin {margin}" if relation in MARGINED else "")
        + (f", best of {len(cands)} (Bonferroni)" if cands else "")
        + f", P({a} better) {c.prob:.2f}"
        + (f", e {c.e:.3g}" if rule.evidence == "e" else "")
    )
    return c


def _evalue(c: Comparison, relation: str) -> float:
    """The comparison's e-value before best-of: the smaller of the safe t-test on its t and df and on the two
    rows' own t and df (directional: analysis/evalues.guarded_evalue), Shafer's calibrator on its p ('~', already
    multiplied by the candidates: analysis/stats/evalues.py)."""
    if relation in MARGINED:
        return calibrated(c.p)
    return guarded_evalue(c.diff, c.se, c.dof, c.own_se, c.own_dof, n_eff(c.na, c.nb), guard=has_guard(c))


def has_guard(c: Comparison) -> bool:
    """Is the comparison's e-value guarded by the rows' own spread (Rule.guard_df finite)?"""
    return math.isfinite(c.guard_df)


def own_error(va: np.ndarray, vb: np.ndarray, floor: tuple[float, float],
              prior_df: float = 0.0) -> tuple[float, float, tuple]:  # fmt: skip
    """The guard's standard error of mean(a) - mean(b), its df and the two variances it used: Welch on each row's
    own seed variance, floored at the noise model's for that row (``floor``), so nothing is shared between the
    two rows or borrowed to shrink a noisy one; (nan, 0, ()) where a row has fewer than two seeds.  (The two rows'
    pooled variance, unfloored Welch and Welch on min(na, nb) - 1 df were measured against it: docs/verdicts.md,
    benchmarks/verdict_calibration.py --evalues.)  ``prior_df`` d > 0 (Rule.guard_df, for measuring
    the guard's cost only): each row's variance is (d floor + (n - 1) own) / (d + n - 1) on d + n - 1 df instead."""
    if min(len(va), len(vb)) < 2:
        return float("nan"), 0.0, ()
    own = [(len(v) - 1, float(v.var(ddof=1))) for v in (va, vb)]
    if prior_df:
        var = tuple((prior_df * f + k * s2) / (prior_df + k) for (k, s2), f in zip(own, floor))
    else:
        var = tuple(max(s2, f) for (_, s2), f in zip(own, floor))
    return math.sqrt(var[0] / len(va) + var[1] / len(vb)), own_dof(len(va), len(vb), var[0], var[1], prior_df), var


def own_dof(na: int, nb: int, var_a: float, var_b: float, prior_df: float = 0.0) -> float:
    """Welch-Satterthwaite's df of var_a/na + var_b/nb on the rows' own na - 1 and nb - 1 df (each plus
    ``prior_df``)."""
    a, b = var_a / na, var_b / nb
    fa, fb = na - 1 + prior_df, nb - 1 + prior_df
    if a + b == 0:
        return float(fa + fb)
    return (a + b) ** 2 / (a**2 / fa + b**2 / fb)


def n_eff(na: int, nb: int) -> float:
    """The seeds the difference of two means is worth: its variance is sd^2 / n_eff."""
    return na * nb / (na + nb)


def strength(c: Comparison, evidence: str = "p") -> float:
    """What the family's procedure runs on: the p, or with ``evidence`` "e" 1/e capped at 1 (e-BH is BH on 1/e)."""
    if evidence == "p":
        return c.p
    if math.isnan(c.e):
        raise ValueError(f"{c.a} vs {c.b} has no e-value: compare it under Rule(evidence='e')")
    return min(1.0, 1.0 / c.e) if c.e > 0 else 1.0


def improvement(va: np.ndarray, vb: np.ndarray, reading: str) -> float:
    """The probability of improvement (rliable's P(X > Y)): over every pair of a seed of a and a seed of b, the
    share where a's is better on the reading, ties counted half: the Mann-Whitney U of a over b divided by the
    pairs (scipy).  An effect size beside the verdict, on the seeds' own scale; it decides nothing (with two
    seeds a row it is one of 0, 1/4, 1/2, 3/4, 1)."""
    sign = 1 if get_reading(reading).higher_is_better else -1
    u = stats.mannwhitneyu(sign * va, sign * vb, method="asymptotic").statistic
    return float(u / (len(va) * len(vb)))


def _equivalence(diff: float, se: float, dof: float, margin: float | None) -> tuple[float, bool]:
    """(p, agrees): TOST p for 'equal within margin' or the p for 'differs by more than margin', the smaller.

    Both read off the same interval, at 1 - 2 level: TOST (two one-sided tests, each at the level) holds the
    equivalence where that interval lies inside +-margin; 'beyond' is the exact test of |true diff| <= margin
    rejected for large |diff| (its p is the chance of a |diff| this large at a true difference of exactly the
    margin, both tails), so it contradicts where that interval lies outside the margin, up to the far tail."""
    if margin is None:
        raise ValueError("an '~' comparison needs a margin in the claim's data")
    p_tost = max(stats.t.sf((diff + margin) / se, dof), stats.t.cdf((diff - margin) / se, dof))
    p_beyond = stats.t.sf((abs(diff) - margin) / se, dof) + stats.t.cdf((-abs(diff) - margin) / se, dof)
    return (float(p_tost), True) if p_tost <= p_beyond else (float(min(1.0, p_beyond)), False)


def _noninferiority(quality: float, se: float, dof: float, margin: float | None) -> tuple[float, bool]:
    """(p, agrees) of 'no worse than by more than margin' on the difference in quality (a's minus b's, better
    positive): the one-sided t-test of H0 quality <= -margin (agrees where rejected) or of H0 quality >= -margin
    (contradicts where rejected: worse beyond the margin), whichever p is smaller.  A clearly better row agrees."""
    if margin is None:
        raise ValueError("a '>=' or '<=' comparison needs a margin in the claim's data")
    if se == 0:
        return (0.0, quality > -margin)
    t = (quality + margin) / se
    p_no_worse, p_worse = float(stats.t.sf(t, dof)), float(stats.t.cdf(t, dof))
    return (p_no_worse, True) if p_no_worse <= p_worse else (p_worse, False)


def holm(pvalues: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rejections (the same decisions as statsmodels' multipletests(method="holm"), which
    tests/analysis/test_verdicts.py checks; written out because that function runs gc.collect() on every call)."""
    order = np.argsort(pvalues, kind="stable")
    reject = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        reject[i] = True
    return reject


def decide(comps: list[Comparison], rule: Rule) -> None:
    """The family's procedure over the comparisons that have a p: a comparison not rejected becomes WITHIN_NOISE.
    Each gets ``threshold``: the p at or under which it would have been rejected in this family (used for the
    difference the table could detect)."""
    tested = [c for c in comps if c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS)]
    if not tested:
        return
    p = [strength(c, rule.evidence) for c in tested]
    if rule.cutoff is not None and rule.family == "report":  # the whole report's family, decided elsewhere
        threshold, reject = rule.cutoff, [x <= rule.cutoff for x in p]
    else:
        threshold, reject = _procedure(p, rule)
    for c, r in zip(tested, reject):
        c.threshold, c.decided_on = threshold, rule.evidence
        if not r:
            c.outcome = Outcome.WITHIN_NOISE


def _procedure(p: list[float], rule: Rule) -> tuple[float, list[bool]]:
    """(threshold, rejections) of the rule's procedure over p: it rejects exactly the p at or under the threshold
    (BH: alpha r / m, Holm: alpha / (m - r), for r rejections of m; alpha / m when none is rejected)."""
    m = len(p)
    if rule.method == "bh":
        reject = list(stats.false_discovery_control(p, method="bh") <= rule.alpha)
        return rule.alpha * max(sum(reject), 1) / m, reject
    reject = holm(p, rule.alpha)
    return rule.alpha / max(m - sum(reject), 1), reject


def family_rule(comps: list[Comparison], rule: Rule) -> Rule:
    """``rule`` with the cutoff of the family ``comps`` (every comparison the report prints, before any is
    decided): deciding each table at it is the procedure over their union."""
    p = [strength(c, rule.evidence) for c in comps if c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS)]
    if rule.family != "report":
        return rule
    threshold = _procedure(p, rule)[0] if p else rule.alpha
    return replace(rule, cutoff=threshold, size=len(p))


def raw_level(c: Comparison) -> float:
    """The level a comparison's raw p (before best-of and looks) is decided at: the family's threshold divided by
    what its p was multiplied by (the strictest, alpha / factor, where the threshold is not known)."""
    threshold = c.threshold if math.isfinite(c.threshold) else c.level * c.factor
    if c.decided_on == "e" and c.relation in MARGINED:  # calibrated(p * factor) >= 1 / threshold
        return uncalibrated(1 / min(threshold, c.level * c.factor)) / c.factor
    return min(threshold, c.level * c.factor) / c.factor


def critical(c: Comparison, dof: float, na: int, nb: int) -> float:
    """The |t| a comparison's raw statistic needs to be decided at the family's threshold with ``na``, ``nb``
    seeds on ``dof`` df: two-sided t at ``raw_level`` (p-values, and '~' on e-values through the calibrator), or
    where the safe t-test's e-value reaches factor / threshold (e-values)."""
    if guarded(c):
        return critical_t(e_needed(c), dof, n_eff(na, nb))
    return float(stats.t.ppf(1 - raw_level(c) / 2, dof))


def e_needed(c: Comparison) -> float:
    """The raw e-value (before best-of) a comparison decided on e-values needs at the family's threshold."""
    threshold = c.threshold if math.isfinite(c.threshold) else c.level * c.factor
    return c.factor / min(threshold, c.level * c.factor)


def guarded(c: Comparison) -> bool:
    """Is the comparison decided on the safe t-test's e-value, the smaller of two (the noise model's and the rows'
    own: evalues.guarded_evalue)?  Directional comparisons under Rule(evidence="e"); '~' ones go through the
    calibrator."""
    return c.decided_on == "e" and c.relation not in MARGINED


def own_projected(c: Comparison, na: int, nb: int, var: tuple = ()) -> tuple[float, float]:
    """The guard's standard error and df with ``na``, ``nb`` seeds at the rows' variances ``var`` (their own as now
    by default: 'detectable'; the loop's could-decide gives the noise model's instead: the rows' own at two seeds
    are too noisy a guide to where seeds are worth adding); (nan, 0) where there is no own spread."""
    var = var or c.own_var
    if not var or min(na, nb) < 2:
        return float("nan"), 0.0
    return math.sqrt(var[0] / na + var[1] / nb), own_dof(na, nb, var[0], var[1], c.guard_df)


def detectable(c: Comparison, power: float = 0.8) -> float:
    """The smallest true difference this comparison would detect with ``power``, at the family's threshold (its
    raw p being multiplied by the best-of candidates x looks) and its own standard error (nan when it was not
    tested)."""
    if not (math.isfinite(c.se) and math.isfinite(c.threshold)):
        return float("nan")
    found = _detectable(critical(c, c.dof, c.na, c.nb), c.dof, c.se, power)
    if guarded(c) and has_guard(c):  # the guard's test must pass too: at least the larger of the two
        own_se, own_dof = own_projected(c, c.na, c.nb)
        if not own_dof:
            return float("inf")
        found = max(found, _detectable(critical_t(e_needed(c), own_dof, n_eff(c.na, c.nb)), own_dof, own_se, power))
    return found


def _detectable(crit: float, dof: float, se: float, power: float) -> float:
    """The true difference at which a t statistic on ``dof`` df with standard error ``se`` passes ``crit`` with
    ``power`` (scipy's noncentral t: the estimated standard error's own noise counts, which matters at the small
    levels of a large family)."""
    if not math.isfinite(crit):
        return float("inf")

    def short(x: float) -> float:
        return float(stats.nct.sf(crit, dof, x)) - power

    hi = crit + 10.0
    while short(hi) < 0 and hi < 1e6:  # few df: the power comes slowly
        hi *= 4
    if short(hi) < 0:
        return float("inf")
    return float(optimize.brentq(short, 0.0, hi) * se)


# ---------------------------------------------------------------------------------------------- claims
@dataclass
class ClaimResult:
    claim: str
    reading: str
    verdict: Verdict
    comparisons: list[Comparison]
    detail: str
    detectable: float = float("nan")  # the largest of its comparisons' detectable differences
    diverged: dict = field(default_factory=dict)  # row -> diverged seeds (not in the means)


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
    res = ClaimResult(Claim.of(claim).id, reading, verdict, comps, detail, diverged=gone)
    res.detectable = max((detectable(c) for c in comps), default=float("nan"))
    return res


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
    reading's model (several tables judged as one family: analysis.report.simulate)."""
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


# ---------------------------------------------------------------------------------------------- unstable flags
def unstable_counts(claims: pd.DataFrame, versus: pd.DataFrame, all_claims: list[Claim] | None = None) -> dict:
    """{flagged, units, comparisons} of a report's tables (tables.judge_report's claims and rows against base):
    lines judged over the budget (with a trajectory), those flagged, and the comparisons they hold."""
    from_id = {c.id: len(c.comparisons) for c in as_claims(all_claims or CLAIMS)}
    flagged = units = comparisons = 0
    for frame, per_line in ((claims, lambda r: from_id.get(r["claim"], 1)), (versus, lambda r: 1)):
        for _, r in frame.iterrows() if len(frame) and "trajectory" in frame else ():
            if "→" not in str(r["trajectory"]):
                continue
            units += 1
            flagged += bool(r["unstable"])
            comparisons += per_line(r)
    return {"flagged": flagged, "units": units, "comparisons": comparisons}


# ---------------------------------------------------------------------------------------------- adaptive seeds
def undecided_rows(df: pd.DataFrame, claims: list[Claim], rule: Rule, max_seeds: int) -> dict[str, str]:
    """Rows where more seeds could decide a verdict: {row: why}.

    A comparison qualifies when it is within noise (or lacks replicates) and, if its observed difference
    were the truth, the test with both rows at max_seeds would be decisive (|d| beyond the critical value at
    the family's threshold, with the projected standard error).  The loop then adds one seed per round to
    each such row; rows already at max_seeds are left out.
    """
    why: dict[str, str] = {}
    claims = as_claims(claims)
    j = judge_table(df, claims, rule)
    values = {r: seed_values(df, r) for r in dict.fromkeys(r for c in claims for r in c.readings)}
    noise = table_noise(values, rule.variance)
    for res in j.claims:
        reading = res.reading
        for c in res.comparisons:
            if c.outcome not in (Outcome.WITHIN_NOISE, Outcome.NO_REPLICATES, Outcome.NO_NOISE):
                continue
            na, nb = len(values[reading].get(c.a, ())), len(values[reading].get(c.b, ()))
            then = (max(na, max_seeds), max(nb, max_seeds))
            if not na or not nb or not _could_decide(c, noise[reading], (na, nb), then, rule):
                continue
            for row, n in ((c.a, na), (c.b, nb)):
                if n < max_seeds and row not in why:
                    why[row] = f"{res.claim} ({get_reading(reading).label}): {c.a} vs {c.b} {c.outcome.value}"
    return why


def _could_decide(c: Comparison, noise: Noise, now: tuple[int, int], then: tuple[int, int], rule: Rule) -> bool:
    """Would the test be decisive with ``then`` seeds, if the observed difference and spreads were the truth?
    The pooled df is projected to grow by the seeds added; the level is the family's threshold (alpha / the
    family's size when nothing was rejected: the strictest)."""
    if noise.df == 0 or not math.isfinite(noise.sigma):
        return True  # no noise estimate yet: replicates are what is missing
    added = (then[0] - now[0]) + (then[1] - now[1])
    own = dict(noise.own)
    for row, k in ((c.a, then[0] - now[0]), (c.b, then[1] - now[1])):
        if row in own:
            own[row] = (own[row][0], own[row][1] + k)
    projected = Noise(noise.sigma, noise.df + added, noise.rows, noise.prior_df, noise.prior_sd, own, noise.floored,
                      noise.model)  # fmt: skip
    se, dof = standard_error(projected, c.a, then[0], c.b, then[1])
    level = raw_level(c)  # the family's threshold over best-of candidates x looks, as the verdict
    if c.relation == "~":
        assert c.margin is not None  # a '~' comparison is made with its margin (compare)
        shown = abs(c.diff) + stats.t.ppf(1 - level, dof) * se < c.margin  # equal within the margin
        return shown or abs(c.diff) - c.margin > stats.t.ppf(1 - level, dof) * se  # or beyond it
    if c.relation in MARGINED:  # one-sided against the margin: decisive when quality + margin is far from 0
        assert c.margin is not None
        sign = (1 if get_reading(c.reading).higher_is_better else -1) * (1 if c.relation == ">=" else -1)
        return abs(sign * c.diff + c.margin) > stats.t.ppf(1 - level, dof) * se
    if not abs(c.diff) > critical(c, dof, *then) * se:
        return False
    if guarded(c) and has_guard(c):  # and the guard's own test on its df at ``then``, at the noise model's spread
        s2 = se**2 / (1 / then[0] + 1 / then[1])
        own_se, dof_then = own_projected(c, *then, var=(s2, s2))
        return bool(dof_then) and abs(c.diff) > critical_t(e_needed(c), dof_then, n_eff(*then)) * own_se
    return True


def sweep_rule(
    adaptive: AdaptiveRecord | dict | None, family: str = "report", method: str = "bh", evidence: str | None = None
) -> Rule:
    """The rule a sweep is judged by, in its adaptive loop and its report: on the evidence its spec chose
    (``seeds: {min, max, evidence: e}``, recorded in sweep.json's adaptive record, typed or as sweep.json holds
    it; p where none) unless ``evidence`` overrides it; on p-values every planned look is charged (charged_looks),
    on e-values none."""
    record = read_adaptive(adaptive)
    evidence = evidence or (record.evidence if record else "p")
    looks = charged_looks(record) if evidence == "p" else 1
    return Rule(looks=looks, family=family, method=method, evidence=evidence)


def charged_looks(adaptive: AdaptiveRecord | dict | None) -> int:
    """The looks a sweep's comparisons are charged for (their p is multiplied by it): every planned look once the
    loop has looked at the data, however it stopped.  A wall-clock budget stop is no exception: the loop stops
    when the next round would overrun, and the next round's cost is the number of rows still undecided, so the
    data choose that stop too (charging only the looks taken would not keep alpha: docs/verdicts.md,
    benchmarks/verdict_calibration.py).  One look where the session stopped before the
    loop's first look (a signal, or the budget spent, during the minimum seeds: no result chose it).  A sweep
    without adaptive seeds looks once.  ``adaptive``: the record typed, or as sweep.json holds it."""
    record = read_adaptive(adaptive)
    if not record:
        return 1
    if record.rounds:
        return record.looks
    if record.stop in (StopReason.INTERRUPTED, StopReason.BUDGET_SPENT):  # by hand, or the budget spent, before
        return 1  # the loop judged anything
    return record.looks
