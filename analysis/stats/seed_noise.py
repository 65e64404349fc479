"""Seed noise at two or three seeds per row: moderated variances (empirical Bayes) with a floor at a row's own.

With two seeds a row's own variance has 1 df: alone it can neither be trusted (a test on it has a critical t
of 12.7) nor ignored (pooling assumes every row trains as steadily as the rest, and one row that does not is
then called different from base far too often).  The model, per reading:

* **Prior.** The rows' sample variances s_i^2 (d_i = n_i - 1 df) are taken as draws of a scaled inverse
  chi-square, s0^2 with d0 df, fitted by the moments of log s_i^2 (Smyth 2004, limma's ``fitFDist``).  When the
  spreads agree with one common variance (the fit gives d0 = inf) the prior is the pooled variance with the
  pooled df: the classic pooled t-test.
* **Moderated variance** of a row: (d0 s0^2 + d_i s_i^2) / (d0 + d_i) with d0 + d_i df (capped at the pooled
  df): rows borrow strength from each other in proportion to how alike their spreads are.
* **Floor.** A row whose own sample variance lies beyond the 90th percentile of what the prior predicts for
  its df (s_i^2 / s0^2 above F(d_i, d0)'s 0.9 quantile) keeps its own, when larger than the moderated one: one
  unstable row is then tested with its spread, while rows with an ordinary spread keep the moderated variance
  (a floor for every row would make every test conservative: 3-4% false calls at 5%, and weaker).  Measured
  in benchmarks/verdict_calibration.py.
* **Shared floor.** The readings of one table come from the same trials (``table_noise``): a row whose spread,
  as a ratio to the other rows' pooled variance and averaged over the table's readings, is beyond what one
  common spread predicts is floored on each reading at that mean ratio (``shared_spread``), where its seeds
  may happen to agree on one.

scipy has no fit of Smyth's prior (statsmodels neither), so the 20 lines of ``fit_prior`` follow limma's
``fitFDist``; tests/analysis/test_verdicts.py checks it recovers a known prior.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import special, stats

from analysis.stats.dist import f_ppf, t_ppf

MIN_DF_SINGLE = 3  # pooled df needed before a one-seed row is compared
FLOOR_FROM = 0.9  # a row's own variance is used where it lies beyond this quantile of what the prior predicts
# a row's spread over a table's readings together, as a ratio to the other rows', floors it on each where it lies
# beyond this quantile of what one common spread predicts (1 turns it off); shared_spread
SHARE_FROM = 0.9
# rows with replicates needed to fit the prior: below it the moment fit of d0 is mostly noise and the tests it
# feeds are liberal (a null spec of 4-6 rows: 6.6-8% of reports with a false decided comparison at 5%, against
# 4.3% pooled; tests/analysis/test_spec_claims.py), so a small table takes the pooled t-test
MIN_ROWS_PRIOR = 8
MODELS = ("moderated", "pooled")  # pooled: one variance for every row (the rule before moderation)


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method from limma's trigammaInverse)."""
    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def offset_zeros(s2: np.ndarray) -> np.ndarray:
    """Sample variances with exact zeros (a row whose seeds agree to the last digit, e.g. BLEU 0.0 twice) offset
    to 1e-5 x the median, as limma's ``fitFDist`` does: a zero's log is -inf, and a floor far below the other
    rows (1e-300) made the moment fit read the rows' spreads as wildly unequal (d0 -> 0.01), which left every
    other row with its own 1-df variance.  When more than half are zero, the median of those that are not."""
    s2 = np.maximum(np.asarray(s2, dtype=float), 0.0)
    m = float(np.median(s2))
    if m == 0:
        m = float(np.median(s2[s2 > 0])) if (s2 > 0).any() else 1.0
    return np.maximum(s2, ZERO_OFFSET * m)


ZERO_OFFSET = 1e-5  # limma's


def fit_prior(s2: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """(s0^2, d0) of the scaled inverse chi-square the sample variances s2 (with d df each) are drawn from
    (zeros offset as limma does: ``offset_zeros``)."""
    z = np.log(offset_zeros(s2))
    e = z - special.digamma(d / 2) + np.log(d / 2)
    mean = float(e.mean())
    excess = float(((e - mean) ** 2).sum() / max(len(e) - 1, 1) - special.polygamma(1, d / 2).mean())
    if len(e) < 2 or excess <= 0:
        return math.exp(mean), math.inf
    d0 = 2 * _trigamma_inverse(excess)
    return math.exp(mean + special.digamma(d0 / 2) - math.log(d0 / 2)), d0


@dataclass(frozen=True)
class Noise:
    """Seed noise of one reading: the pooled variance and, per row, the (variance, df) its seeds are tested with."""

    sigma: float  # pooled seed standard deviation (nan when df == 0)
    df: int  # pooled df: sum of n_i - 1 over rows with >= 2 seeds
    rows: int  # rows that contributed (>= 2 seeds)
    prior_df: float = math.inf  # d0 of the moderated model (inf: one common spread; the pooled test)
    prior_sd: float = float("nan")  # s0
    own: dict = field(default_factory=dict)  # row -> (variance, df) of one seed; absent rows use the prior
    floored: tuple = ()  # (row, own sd): rows whose own spread is above their moderated one and is used
    model: str = "moderated"
    shared: tuple = ()  # floored rows whose spread is their mean over the table's readings (shared_spread)

    def spread(self, row: str) -> tuple[float, float]:
        """(variance, df) of one seed of ``row``."""
        if row in self.own:
            return self.own[row]
        if math.isfinite(self.prior_df):
            return self.prior_sd**2, min(self.prior_df, self.df)
        return self.sigma * self.sigma, self.df

    def mean_ci(self, values: np.ndarray, row: str = "", level: float = 0.95) -> tuple[float, float | None, int]:
        """Mean of a row's seeds and the half-width of its interval (None without a noise estimate)."""
        if not len(values):
            return float("nan"), None, 0
        var, dof = self.spread(row)
        if not self.df or not dof or not math.isfinite(var):
            return float(values.mean()), None, len(values)
        half = t_ppf(0.5 + level / 2, dof) * math.sqrt(var / len(values))
        return float(values.mean()), float(half), len(values)

    def describe(self) -> str:
        if not self.df:
            return "no replicate, no estimate"
        text = f"σ = {self.sigma:.3f} (pooled, df {self.df}, {self.rows} rows)"
        if self.model == "moderated":
            d0 = f"{self.prior_df:.2g}" if math.isfinite(self.prior_df) else "∞: the rows' spreads agree, pooled test"
            text += f"; prior df d0 = {d0}"
            if self.floored:
                where = {r: ", its spread over the table's readings" for r in self.shared}
                text += "; own spread used for " + ", ".join(
                    f"{r} (sd {sd:.3f}{where.get(r, '')})" for r, sd in self.floored
                )
        return text


def pooled_noise(values: dict[str, np.ndarray], model: str = "moderated") -> Noise:
    """The seed-noise model of one reading from {row: finished seeds' values} (see the module doc)."""
    stats_ = {r: (float(v.var(ddof=1)), len(v) - 1) for r, v in values.items() if len(v) >= 2}
    dof = sum(d for _, d in stats_.values())
    if not dof:
        return Noise(float("nan"), 0, 0, model=model)
    pooled = sum(s * d for s, d in stats_.values()) / dof
    sigma = math.sqrt(pooled)
    if model == "pooled" or len(stats_) < MIN_ROWS_PRIOR:  # too few spreads to fit a prior: the pooled test
        return Noise(sigma, dof, len(stats_), model=model)
    rows = list(stats_)
    s2 = np.array([stats_[r][0] for r in rows])
    d = np.array([stats_[r][1] for r in rows], dtype=float)
    s02, d0 = fit_prior(s2, d)
    own, floored = {}, []
    for r, si2, di in zip(rows, s2, d):
        if math.isfinite(d0):
            var, vdf = (d0 * s02 + di * si2) / (d0 + di), min(d0 + di, dof)
        else:
            var, vdf = pooled, dof
        if si2 > var and (
            not FLOOR_FROM
            or si2 > _prior_quantile(s02 if math.isfinite(d0) else pooled, di, d0 if math.isfinite(d0) else dof)
        ):
            floored.append((r, math.sqrt(si2)))
            var = float(si2)
        own[r] = (float(var), float(vdf))
    return Noise(sigma, dof, len(stats_), d0, math.sqrt(s02) if math.isfinite(d0) else sigma, own, tuple(floored),
                 model)  # fmt: skip


def table_noise(values: dict[str, dict[str, np.ndarray]], model: str = "moderated") -> dict[str, Noise]:
    """The seed-noise model of each reading of one table ({reading: {row: finished seeds' values}}: the readings
    one table judges, scored by the same trials): each reading's ``pooled_noise``, then each row's spread shared
    over the readings (``shared_spread``)."""
    noise = {r: pooled_noise(v, model) for r, v in values.items()}
    return shared_spread(values, noise) if model == "moderated" else noise


def shared_spread(values: dict[str, dict[str, np.ndarray]], noise: dict[str, Noise]) -> dict[str, Noise]:
    """``noise`` with a row whose spread over the table's readings together is beyond the other rows' floored on each.

    A row's readings come from the same trials, so a row that trains unsteadily is unsteady on every one, while
    its two seeds may happen to agree on one reading: alone, that reading's 1-df variance shrinks it to the prior
    and its mean is tested against a spread a ninth of its own (the false decisions of a 3x row on the readings
    it was not floored on: issue 54 item 3).  Per row and moderated reading, its sample variance over the pooled
    variance of the other rows (``_others_pooled``: a typical row's spread there, which a reading whose prior has
    a small d0, and so an s0^2 far below a typical row's, does not shrink); the mean of these R ratios on d df
    each, whose readings' seed deviations correlate rho_rs, is taken as chi-square on d_eff = d R^2 / sum_rs
    rho_rs^2 df (Satterthwaite's two moments: R independent readings give d R, identical ones d).  Where it lies
    beyond the ``SHARE_FROM`` quantile of F(d_eff, m), m the smallest of the other rows' pooled df over its
    readings (what the ratio is drawn from when the rows share one spread), the row's variance on each reading is
    at least the mean ratio times the other rows' pooled variance there, on the df it had.  Readings with too
    few rows for a prior (``MIN_ROWS_PRIOR``) and rows with replicates on fewer than two readings keep theirs."""
    readings = [r for r, nz in noise.items() if nz.own]
    if len(readings) < 2 or not SHARE_FROM < 1:
        return noise
    rho2 = _squared_correlations(values, readings)
    spreads = {r: _row_variances(values[r]) for r in readings}  # each row's variance once, not once per other row
    floor: dict[str, tuple[float, list[int]]] = {}  # row -> (mean spread ratio, the readings it is floored on)
    for row in dict.fromkeys(row for r in readings for row in noise[r].own):  # table order: the same in every run
        mine = [k for k, r in enumerate(readings) if len(values[r].get(row, ())) >= 2]
        if len(mine) < 2:
            continue
        others = [_others_pooled(spreads[readings[k]], row) for k in mine]
        if any(not (dof > 0 and var > 0) for var, dof in others):
            continue
        d = min(len(values[readings[k]][row]) - 1 for k in mine)
        mean = float(np.mean([spreads[readings[k]][row][0] / var for k, (var, _) in zip(mine, others)]))
        d_eff = d * len(mine) ** 2 / float(rho2[np.ix_(mine, mine)].sum())
        if mean > float(f_ppf(SHARE_FROM, d_eff, min(dof for _, dof in others))):
            floor[row] = (mean, mine)
    out = dict(noise)
    for k, r in enumerate(readings):
        nz = noise[r]
        own, floored, shared = dict(nz.own), dict(nz.floored), []
        for row, (mean, mine) in floor.items():
            if k not in mine:
                continue
            var, vdf = own[row]
            spread = mean * _others_pooled(spreads[r], row)[0]
            if spread > var:
                own[row] = (spread, vdf)
                floored[row] = math.sqrt(spread)
                shared.append(row)
        if shared:
            out[r] = replace(nz, own=own, floored=tuple(floored.items()), shared=tuple(sorted(shared)))
    return out


def _row_variances(values: dict[str, np.ndarray]) -> dict[str, tuple[float, int]]:
    """{row: (sample variance, its df)} of the rows with two seeds or more, in the table's row order."""
    return {r: (float(v.var(ddof=1)), len(v) - 1) for r, v in values.items() if len(v) >= 2}


def _others_pooled(spreads: dict[str, tuple[float, int]], row: str) -> tuple[float, int]:
    """(pooled variance, its df) of the rows other than ``row`` in ``spreads`` (``_row_variances``)."""
    rest = [vd for r, vd in spreads.items() if r != row]
    dof = sum(d for _, d in rest)
    return (sum(var * d for var, d in rest) / dof if dof else float("nan")), dof


def _squared_correlations(values: dict[str, dict[str, np.ndarray]], readings: list[str]) -> np.ndarray:
    """rho_rs^2 of each pair of readings: the correlation of the seeds' deviations from their row's mean, over the
    rows with the same seeds on both (1 where it cannot be told: no gain in df is then taken)."""
    rho2 = np.ones((len(readings), len(readings)))
    for i, r in enumerate(readings):
        for k in range(i):
            s = readings[k]
            pairs = [(a - a.mean(), b - b.mean()) for row, a in values[r].items()
                     if len(a) >= 2 and len(b := values[s].get(row, np.array([]))) == len(a)]  # fmt: skip
            if len(pairs) < 3:
                continue
            x, y = np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])
            if np.std(x) > 0 and np.std(y) > 0:
                rho2[i, k] = rho2[k, i] = float(stats.pearsonr(x, y).statistic) ** 2
    return rho2


def _prior_quantile(s02: float, d: float, d0: float) -> float:
    return float(s02 * f_ppf(FLOOR_FROM, d, d0))


def standard_error(noise: Noise, a: str, na: int, b: str, nb: int) -> tuple[float, float]:
    """(se of mean_a - mean_b, its df): Welch-Satterthwaite on the two rows' variances, with the df capped at
    what the table holds (d0 plus both rows' own df, and the pooled df).  When both rows use the pooled
    variance (the rows' spreads agree) this is the pooled t-test: sigma * sqrt(1/na + 1/nb) on the pooled df."""
    (var_a, df_a), (var_b, df_b) = noise.spread(a), noise.spread(b)
    ua, ub = var_a / na, var_b / nb
    if ua + ub <= 0:
        return 0.0, noise.df
    se = math.sqrt(ua + ub)
    if df_a == df_b == noise.df and var_a == var_b:
        return se, noise.df  # one common variance: the pooled test's df
    ws = (ua + ub) ** 2 / ((ua * ua / df_a if df_a else 0) + (ub * ub / df_b if df_b else 0))
    cap = noise.prior_df + max(na - 1, 0) + max(nb - 1, 0)
    return se, float(min(ws, cap, noise.df))
