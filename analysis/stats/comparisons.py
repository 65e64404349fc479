"""One comparison of two rows on one reading: its difference, interval, p (corrected for best-of and looks), e-value
(with the guard on the rows' own spread), probability of improvement, and the difference it could detect at the
family's threshold.  The seeds' values it is made from are read off a collected frame here too."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import pandas as pd
from scipy import optimize

from analysis.data.claims import MARGINED
from analysis.data.metrics import LOG_COLUMNS, get_reading
from analysis.stats.dist import nct_sf, t_cdf, t_ppf, t_sf
from transformer_core.rundir import Status

from .evalues import calibrated, critical_t, guarded_evalue, uncalibrated
from .guard import Guard
from .rule import ALPHA, Rule
from .seed_noise import MIN_DF_SINGLE, Noise, standard_error


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
    vals = reading_values(fin, reading).to_numpy(dtype=float)
    out = {}
    for row, at in fin.groupby("row").indices.items():  # positions, in the frame's order within each row
        v = vals[at]
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
    guard: Guard = Guard()  # the e-value's guard (Rule.guard)
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
    t_crit = t_ppf(1 - c.level if relation in MARGINED else 1 - c.level / 2, c.dof)
    c.ci = (c.diff - t_crit * c.se, c.diff + t_crit * c.se)
    sign = 1 if get_reading(reading).higher_is_better else -1  # quality = sign * value
    if relation == "~":
        c.p, agrees = _equivalence(c.diff, c.se, c.dof, margin)
    elif relation in MARGINED:  # '>=' a no worse than b by more than the margin, '<=' no better
        c.p, agrees = _noninferiority((sign if relation == ">=" else -sign) * c.diff, c.se, c.dof, margin)
    else:
        c.p = float(2 * t_sf(abs(c.diff) / c.se, c.dof))
        better = sign * c.diff > 0
        agrees = better if relation == ">" else not better
    c.p = min(1.0, c.p * factor)
    if rule.evidence == "e":
        c.guard = rule.guard
        if has_guard(c):
            floor = (noise.spread(a)[0], noise.spread(b_name)[0])
            c.own_se, c.own_dof, c.own_var = own_error(va, vb, floor, c.guard)
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
    """Is the comparison's e-value guarded by the rows' own spread (Rule.guard)?"""
    return c.guard.on


def own_error(va: np.ndarray, vb: np.ndarray, floor: tuple[float, float],
              guard: Guard = Guard()) -> tuple[float, float, tuple]:  # fmt: skip
    """The guard's standard error of mean(a) - mean(b), its df and the two variances it used: Welch on each row's
    own seed variance, floored at the noise model's for that row (``floor``; analysis/stats/guard.py), so nothing
    is shared between the two rows or borrowed to shrink a noisy one; (nan, 0, ()) where a row has fewer than two
    seeds.  (The two rows' pooled variance, unfloored Welch and Welch on min(na, nb) - 1 df were measured against
    it: docs/verdicts.md, benchmarks/verdict_calibration.py --evalues.)"""
    if min(len(va), len(vb)) < 2:
        return float("nan"), 0.0, ()
    var = guard.variances([(len(v) - 1, float(v.var(ddof=1))) for v in (va, vb)], floor)
    return math.sqrt(var[0] / len(va) + var[1] / len(vb)), guard.dof(len(va), len(vb), var[0], var[1]), var


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
    pairs.  Counted over the pairs here rather than through scipy's mannwhitneyu (the same U, which
    tests/analysis/test_report_family.py checks): its input checks cost a millisecond a call, a third of a
    simulated report's time.  An effect size beside the verdict, on the seeds' own scale; it decides nothing (with
    two seeds a row it is one of 0, 1/4, 1/2, 3/4, 1)."""
    sign = 1 if get_reading(reading).higher_is_better else -1
    a, b = sign * np.asarray(va, dtype=float)[:, None], sign * np.asarray(vb, dtype=float)[None, :]
    u = float(np.sum(a > b)) + 0.5 * float(np.sum(a == b))
    return u / (len(va) * len(vb))


def _equivalence(diff: float, se: float, dof: float, margin: float | None) -> tuple[float, bool]:
    """(p, agrees): TOST p for 'equal within margin' or the p for 'differs by more than margin', the smaller.

    Both read off the same interval, at 1 - 2 level: TOST (two one-sided tests, each at the level) holds the
    equivalence where that interval lies inside +-margin; 'beyond' is the exact test of |true diff| <= margin
    rejected for large |diff| (its p is the chance of a |diff| this large at a true difference of exactly the
    margin, both tails), so it contradicts where that interval lies outside the margin, up to the far tail."""
    if margin is None:
        raise ValueError("an '~' comparison needs a margin in the claim's data")
    p_tost = max(t_sf((diff + margin) / se, dof), t_cdf((diff - margin) / se, dof))
    p_beyond = t_sf((abs(diff) - margin) / se, dof) + t_cdf((-abs(diff) - margin) / se, dof)
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
    p_no_worse, p_worse = float(t_sf(t, dof)), float(t_cdf(t, dof))
    return (p_no_worse, True) if p_no_worse <= p_worse else (p_worse, False)


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
    return float(t_ppf(1 - raw_level(c) / 2, dof))


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
    return math.sqrt(var[0] / na + var[1] / nb), c.guard.dof(na, nb, var[0], var[1])


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
        return float(nct_sf(crit, dof, x)) - power

    hi = crit + 10.0
    while short(hi) < 0 and hi < 1e6:  # few df: the power comes slowly
        hi *= 4
    if short(hi) < 0:
        return float("inf")
    return float(optimize.brentq(short, 0.0, hi) * se)
