"""The t, noncentral t, F and normal functions the verdict engine calls, at the cost of scipy's kernels.

A scipy.stats method (``stats.t.ppf`` and the rest) checks, broadcasts and masks its arguments on every call: 60 to
230 us for one value on the 2-core machines this project measures on, against 2 to 100 us for the scipy.special
function it ends in (``stdtrit``, ``stdtr``, ``fdtri``, ``ndtr``; for the t's log density and the noncentral t,
scipy's own ``_logpdf`` and ``_sf``; benchmarks/verdict_speed.py).  A report judges a few hundred comparisons, a
simulated one (the calibration tests and benchmarks) hundreds of thousands, and there this wrapper was most of
the time.

Each function calls the same kernel the scipy.stats method calls where every argument lies inside the
distribution's domain (finite, degrees of freedom above 0, a probability strictly between 0 and 1) and is a float64
(a Python number, a NumPy float64 or a float64 array), and the scipy.stats method itself otherwise, so every value
is scipy's, bit for bit: tests/analysis/test_dist.py compares them over a grid, at the domain's edges and on
inputs of other types.  Scalars give NumPy float64 scalars and arrays arrays, as scipy.stats.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

_SCALARS = (float, int)  # np.float64 is a float


def _plain(*xs) -> bool:
    """Python floats and ints, NumPy float64 scalars and float64 arrays: the inputs on which the kernels were compared
    with scipy.stats.  Anything else (float32, integer arrays, lists) goes to scipy.stats, which converts it its
    own way (float32 picks a kernel's single-precision loop here)."""
    return all(type(x) in _SCALARS or (isinstance(x, (np.ndarray, np.float64)) and x.dtype == np.float64) for x in xs)


def _finite(*xs) -> bool:
    return all(math.isfinite(x) if isinstance(x, _SCALARS) else bool(np.all(np.isfinite(x))) for x in xs)


def _positive(*dfs) -> bool:
    return _finite(*dfs) and all(d > 0 if isinstance(d, _SCALARS) else bool(np.all(np.asarray(d) > 0)) for d in dfs)


def _probability(q) -> bool:
    if isinstance(q, _SCALARS):
        return bool(0 < q < 1)
    q = np.asarray(q)
    return bool(np.all((q > 0) & (q < 1)))


def _scalar(r):
    """scipy.stats' shape of result: a 0-d array becomes its float64 scalar."""
    return r[()] if isinstance(r, np.ndarray) and r.ndim == 0 else r


def t_ppf(q, df):
    """stats.t.ppf(q, df)."""
    if _plain(q, df) and _probability(q) and _positive(df):
        return _scalar(special.stdtrit(df, q))
    return stats.t.ppf(q, df)


def t_sf(x, df):
    """stats.t.sf(x, df)."""
    if _plain(x, df) and _finite(x) and _positive(df):
        return _scalar(special.stdtr(df, -np.asarray(x, dtype=float)))
    return stats.t.sf(x, df)


def t_cdf(x, df):
    """stats.t.cdf(x, df)."""
    if _plain(x, df) and _finite(x) and _positive(df):
        return _scalar(special.stdtr(df, np.asarray(x, dtype=float)))
    return stats.t.cdf(x, df)


def t_logpdf(x, df):
    """stats.t.logpdf(x, df)."""
    if _plain(x, df) and _finite(x) and _positive(df):
        return _scalar(np.asarray(stats.t._logpdf(np.asarray(x, dtype=float), np.asarray(df, dtype=float))))
    return stats.t.logpdf(x, df)


def nct_logpdf(x, df, nc):
    """stats.nct.logpdf(x, df, nc)."""
    if _plain(x, df, nc) and _finite(x, nc) and _positive(df):
        args = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (x, df, nc)))
        return _scalar(np.asarray(stats.nct._logpdf(*args)))
    return stats.nct.logpdf(x, df, nc)


def nct_sf(x, df, nc):
    """stats.nct.sf(x, df, nc)."""
    if _plain(x, df, nc) and _finite(x, nc) and _positive(df):
        args = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (x, df, nc)))
        return _scalar(np.asarray(stats.nct._sf(*args)))
    return stats.nct.sf(x, df, nc)


def f_ppf(q, dfn, dfd):
    """stats.f.ppf(q, dfn, dfd)."""
    if _plain(q, dfn, dfd) and _probability(q) and _positive(dfn, dfd):
        return _scalar(special.fdtri(dfn, dfd, q))
    return stats.f.ppf(q, dfn, dfd)


def norm_sf(x):
    """stats.norm.sf(x)."""
    if _plain(x) and _finite(x):
        return _scalar(special.ndtr(-np.asarray(x, dtype=float)))
    return stats.norm.sf(x)


def norm_cdf(x):
    """stats.norm.cdf(x)."""
    if _plain(x) and _finite(x):
        return _scalar(special.ndtr(np.asarray(x, dtype=float)))
    return stats.norm.cdf(x)
