"""analysis.stats.dist gives scipy.stats' values bit for bit, in scipy.stats' types, inside and outside the domain."""

import itertools

import numpy as np
import pytest
from scipy import stats

from analysis.stats import dist

X = [0.0, -0.0, 0.3, -1.7, 2.5, 12.0, -40.0, 1e4, np.inf, -np.inf, np.nan]
DF = [0.5, 1.0, 2.0, 3.7, 16.0, 150.0, 1e6, np.inf, 0.0, -1.0, np.nan]
Q = [0.0, 1e-12, 0.0025, 0.05, 0.5, 0.9, 0.975, 1.0 - 1e-12, 1.0, -0.1, 1.5, np.nan]
NC = [0.0, 1.5, -2.4, 6.0, np.nan]

CASES = {  # ours, scipy's, the grids of their arguments
    "t_ppf": (dist.t_ppf, stats.t.ppf, [Q, DF]),
    "t_sf": (dist.t_sf, stats.t.sf, [X, DF]),
    "t_cdf": (dist.t_cdf, stats.t.cdf, [X, DF]),
    "t_logpdf": (dist.t_logpdf, stats.t.logpdf, [X, DF]),
    "nct_logpdf": (dist.nct_logpdf, stats.nct.logpdf, [X[:8] + [np.inf, np.nan], DF[:7] + [0.0], NC]),
    "nct_sf": (dist.nct_sf, stats.nct.sf, [X[:8] + [np.inf, np.nan], DF[:7] + [0.0], NC]),
    "f_ppf": (dist.f_ppf, stats.f.ppf, [Q, DF[:6] + [0.0, np.inf], [1.0, 4.5, 30.0, 0.0]]),
    "norm_sf": (dist.norm_sf, stats.norm.sf, [X]),
    "norm_cdf": (dist.norm_cdf, stats.norm.cdf, [X]),
}


def _call(f, args):
    try:
        return f(*args)
    except Exception as exc:  # scipy's own overflow (boost's gamma function beyond 1e5 df): ours must raise it too
        return type(exc)


def _same(ours, theirs) -> bool:
    """Equal bits (NaN with NaN, 0.0 apart from -0.0), the same type and shape; or the same exception."""
    if isinstance(ours, type) or isinstance(theirs, type):
        return ours is theirs
    if type(ours) is not type(theirs) or np.shape(ours) != np.shape(theirs):
        return False
    if isinstance(ours, np.ndarray) and ours.dtype != theirs.dtype:
        return False
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return a.tobytes() == b.tobytes() or bool(
        np.all((a == b) & (np.signbit(a) == np.signbit(b)) | np.isnan(a) & np.isnan(b))
    )


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_scalar_on_the_grid_is_scipys(name):
    ours, theirs, grids = CASES[name]
    differ = []
    for args in itertools.product(*grids):
        mine, scipys = _call(ours, args), _call(theirs, args)
        if not _same(mine, scipys):
            differ.append((args, mine, scipys))
    assert not differ, differ[:5]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_arrays_and_zero_d_arrays_are_scipys(name):
    ours, theirs, grids = CASES[name]
    rng = np.random.default_rng(3)
    inside = [np.array(g[:4], dtype=float) for g in grids]  # broadcast shapes: (4,), (4, 1), (4, 1, 1)
    shaped = [g.reshape((-1,) + (1,) * i) for i, g in enumerate(inside)]
    assert _same(ours(*shaped), theirs(*shaped))
    for _ in range(20):  # 0-d arrays (what t_evalue passes) and NumPy scalars, inside the domain and at its edges
        args = [np.asarray(rng.choice(g)) for g in grids]
        assert _same(ours(*args), theirs(*args)), args
        scalars = [a[()] for a in args]
        assert _same(ours(*scalars), theirs(*scalars)), scalars


KINDS = {  # other types a caller might pass: scipy.stats converts them its own way, and dist leaves them to it
    "float32 scalar": np.float32,
    "float32 array": lambda v: np.array([v, v], dtype=np.float32),
    "int": lambda v: int(v) if float(v).is_integer() else v,
    "NumPy int": lambda v: np.int64(v) if float(v).is_integer() else v,
    "list": lambda v: [v, v],
    "bool": lambda v: bool(v) if v in (0.0, 1.0) else v,
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_other_input_types_are_scipys(name, kind):
    ours, theirs, grids = CASES[name]
    inside = [[v for v in g if np.isfinite(v)][:6] for g in grids]
    for position in range(len(grids)):  # each argument in turn of the other type
        for args in itertools.product(*inside):
            args = [KINDS[kind](a) if i == position else a for i, a in enumerate(args)]
            mine, scipys = _call(ours, args), _call(theirs, args)
            assert _same(mine, scipys), (args, mine, scipys)


@pytest.mark.parametrize("name", sorted(CASES))
def test_in_the_domain_the_kernel_answers_not_scipy_stats(name, monkeypatch):
    """The point of dist: scipy.stats' method is not called for an ordinary comparison's arguments."""
    ours, theirs, _ = CASES[name]
    method = theirs.__name__
    dist_object = theirs.__self__

    def refuse(*args, **kwargs):
        raise AssertionError(f"scipy.stats' {method} was called")

    monkeypatch.setattr(dist_object, method, refuse)
    args = {1: (0.4,), 2: (0.4, 7.3), 3: (0.4, 7.3, 1.5)}[len(CASES[name][2])]
    assert np.isfinite(ours(*args))
    assert np.isfinite(ours(*(np.asarray(a) for a in args)))
    assert np.all(np.isfinite(ours(*(np.array([a, a]) for a in args))))
