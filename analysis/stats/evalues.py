"""Anytime-valid evidence: a comparison's e-value from the seed replicates, decided by e-BH.

An **e-value** is a nonnegative statistic whose expectation under the null is at most 1; by Markov's inequality
it reaches 1/alpha with probability at most alpha.  When a sequence of them is a nonnegative supermartingale under
the null (a test martingale), that holds at any stopping time too: seeds can be added to an undecided row, or the
sweep stopped when something looks decided, and the error rate is kept (optional stopping and continuation).

* **The safe t-test** (Grünwald, de Heide & Koolen, "Safe testing"; the R package safestats' ``safeTTestStat``
  with its t-density representation): the likelihood ratio of the t statistic, with, in the numerator, half the
  noncentral t at +sqrt(n_eff) delta and half at -sqrt(n_eff) delta (delta: the effect, in seed sd, the test is
  designed to find; n_eff = na nb / (na + nb)), and the central t in the denominator.  It equals the Bayes factor
  with the right-Haar prior on the nuisance parameters (every row's mean and the common seed sd; Pérez-Ortiz,
  Lardy, de Heide & Grünwald, "E-statistics, group invariance and anytime-valid testing"), so with a common sd it
  is exactly an e-value at any number of seeds, and its sequence over seeds is a test martingale in the filtration
  of the scale-invariant data (stopping rules that read only t statistics and e-values, as the adaptive loop does,
  are covered).  With moderated variances (the default noise model) t and its df are the moderated ones: the
  e-value is then exact where the p-value is (t follows t on those df under the null); a plug-in otherwise, as
  the p is.
* **The guard against a row noisier than the others.** The moderated (or pooled) t borrows the other rows' spread,
  so a row whose own seed sd is larger than theirs gets a t too large for it, and no e-value on that t is valid for
  it (more so when it is given more seeds on the way). ``guarded_evalue`` takes the smaller of that e-value and the
  safe t-test on Welch's t of the two rows alone (analysis.stats.comparisons.own_error: each row's own variance,
  floored at the noise model's for it, on Welch-Satterthwaite's df). The smaller of two e-processes is one too (at
  any stopping time its mean is at most either's), so the guard holds wherever either test does. Welch's t is near t
  on those df whatever the two sds and seeds (the pooled variance of the two rows is not, against a base with more
  seeds than the noisy row, as the adaptive loop leaves it); the floor keeps a variance that came out small by
  chance on one df from making it liberal. The price: on two seeds a row the own df are 1-2 and the e-value never
  passes 10, so nothing is decided there, and a report's family needs several more seeds for what the moderated t
  alone would decide (measured: benchmarks/verdict_calibration.py --evalues, its figures in benchmarks/results/ and
  docs/verdicts.md).
* **Directions.** The two halves are each valid for a one-sided null (the noncentral t has monotone likelihood
  ratio), and the half on the observed side is the larger, so a rejection on the e-value also controls deciding
  on the wrong side.
* **'~' (equal within a margin)** has no scale-invariant e-value: the margin is in the reading's units, so the
  null "|difference| >= margin" is composite in the seed sd and the right-Haar argument does not apply.  Its TOST
  / beyond-the-margin p is turned into an e-value by Shafer's calibrator p^(-1/2) - 1 (valid at a fixed number of
  seeds, **not** under optional stopping), and it needs p <= 0.0023 to reach 20.
* **e-BH** (Wang & Ramdas 2022): reject the k largest e-values for the largest k with e_(k) >= m / (alpha k).
  That is Benjamini-Hochberg on the p-values 1/e (p_(k) <= alpha k / m), so ``ebh`` runs scipy's BH on min(1, 1/e);
  the false discovery rate is at most alpha under **any** dependence between the e-values (BH on ordinary p-values
  needs positive dependence).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from analysis.stats.dist import nct_logpdf, t_logpdf

DESIGN_DELTA = 3.0  # the effect (in seed sd) the safe t-test is designed for: issue 44's power target, 3 sd
# the df the e-value is computed at, at most (19 rows reach it at 9 seeds each): scipy's noncentral t density
# fails beyond (nan at 300 df and t = -3, an overflow at 1000).  Capping keeps it an e-value: it grows with |t|,
# and |t| on more df is stochastically smaller (every quantile of |t| falls with the df), so its mean under the
# null is at most its mean on MAX_DOF df, which is 1.
MAX_DOF = 150.0


def t_evalue(t, dof, n_eff, delta: float = DESIGN_DELTA):
    """The safe t-test's e-value of a two-sided comparison: [nct(t; dof, +ncp) + nct(t; dof, -ncp)] / 2 over
    t(t; dof), ncp = delta sqrt(n_eff) (scipy's noncentral t, in logs; |t| = inf gives inf).  Arrays broadcast; a
    float for scalars; dof above MAX_DOF is taken as MAX_DOF.  Where scipy's noncentral density fails, the e-value
    is made smaller, never larger, so it stays an e-value: the far component (the noncentral t on the other side
    of 0 from t) is dropped where it underflows or is nan (below MAX_DOF it underflows, e.g. at 150 df and
    t = -9), and where the near one underflows too (|t| of 1e4 at 150 df) |t| is halved until it does not (the
    e-value grows with |t|)."""
    t, dof, n_eff = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (t, dof, n_eff)))
    dof = np.minimum(dof, MAX_DOF)
    ncp = delta * np.sqrt(n_eff)
    at = np.where(np.isfinite(t), np.abs(t), 0.0)  # the e-value is symmetric in t
    for _ in range(64):
        near = nct_logpdf(at, dof, ncp)
        if np.isfinite(near).all():
            break
        at = np.where(np.isfinite(near), at, at / 2)
    far = np.nan_to_num(nct_logpdf(-at, dof, ncp), nan=-np.inf)  # = nct(at; dof, -ncp)
    log_e = np.logaddexp(near, far) - math.log(2) - t_logpdf(at, dof)
    e = np.where(np.isfinite(t), np.exp(log_e), np.inf)
    return float(e) if e.ndim == 0 else e


def guarded_evalue(
    diff: float,
    se: float,
    dof: float,
    own_se: float,
    own_dof: float,
    n_eff: float,
    delta: float = DESIGN_DELTA,
    guard: bool = True,
) -> float:
    """The smaller of the safe t-test's e-value on diff / se at ``dof`` (the noise model's) and on diff / own_se at
    ``own_dof`` (the two rows' own seeds; see the module doc).  No own spread (own_dof < 1: one seed a row) gives
    at most 1: nothing to guard with, nothing decided.  A zero standard error gives inf for a nonzero diff, 1 for
    none.  ``guard`` False: the noise model's e-value alone (an unguarded rule: measuring only,
    benchmarks/guards.py)."""

    def one(s: float, d: float) -> float:
        if s == 0:
            return math.inf if diff else 1.0
        return float(t_evalue(diff / s, d, n_eff, delta))

    model = one(se, dof)
    if not guard:
        return model
    if not (own_dof >= 1 and math.isfinite(own_se)):
        return min(model, 1.0)
    return min(model, one(own_se, own_dof))


def calibrated(p: float) -> float:
    """Shafer's calibrator p^(-1/2) - 1: an e-value from a p-value valid at a fixed sample size (its integral over
    p in [0, 1] is 1).  Not anytime-valid: the p it starts from is not.  scipy has no calibrators."""
    return math.inf if p <= 0 else max(float(p) ** -0.5 - 1.0, 0.0)


def uncalibrated(e: float) -> float:
    """The p at or under which ``calibrated`` reaches e: (1 + e)^-2."""
    return (1.0 + e) ** -2


def ebh(e: list[float], alpha: float) -> list[bool]:
    """e-BH's rejections: the k largest e-values for the largest k with e_(k) >= m / (alpha k), i.e. BH on 1/e
    (scipy's false_discovery_control; 1/e capped at 1, which changes no decision: e-BH never rejects e < 1/alpha)."""
    if not len(e):
        return []
    p = np.minimum(1.0, 1.0 / np.maximum(np.asarray(e, dtype=float), 1e-300))
    return list(stats.false_discovery_control(p, method="bh") <= alpha)


def critical_t(e_needed: float, dof: float, n_eff: float, delta: float = DESIGN_DELTA) -> float:
    """The |t| at which ``t_evalue`` reaches e_needed (it grows with |t|); inf where it never does (few df: the
    e-value is bounded, the t tails being heavy under the alternative too).  Bracketed on a log grid, refined
    twice on finer grids inside the bracket and interpolated (log e is smooth in t): three vectorised calls of 32
    points, as a report asks this of every comparison ('detectable'); brentq's scalar calls took ten times as long."""
    target = math.log(e_needed)
    grid = np.concatenate([[0.0], np.geomspace(0.05, 1e6, 31)])
    for _ in range(3):
        log_e = np.log(t_evalue(grid, dof, n_eff, delta))
        if log_e[0] >= target:
            return float(grid[0])
        if not (log_e >= target).any():
            return math.inf
        k = int(np.argmax(log_e >= target))
        lo, hi = grid[k - 1], grid[k]
        grid = np.linspace(lo, hi, 32)
    return float(np.interp(target, log_e[k - 1 : k + 1], (lo, hi)))
