"""Means with 95% intervals across seeds, and paired bootstrap significance (sacrebleu)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy import stats


def mean_ci(values) -> tuple[float, float | None, int]:
    """Mean, half-width of the 95% t-interval (None for a single seed), n."""
    v = np.asarray([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], dtype=float)
    if len(v) == 0:
        return float("nan"), None, 0
    if len(v) == 1:
        return float(v[0]), None, 1
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean()), float(half), len(v)


def intervals_overlap(a: tuple, b: tuple) -> bool | None:
    (ma, ha, _), (mb, hb, _) = a, b
    if ha is None or hb is None:
        return None
    return abs(ma - mb) <= ha + hb


def paired_bootstrap(base_hyps: list[str], row_hyps: list[str], refs: list[str], samples: int = 1000) -> float:
    """p-value of sacrebleu's paired bootstrap resampling: row against base on the same references."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if base_hyps == row_hyps:  # identical output: no difference to test (sacrebleu would report p = 1/(n+1))
        return 1.0

    test = PairedTest(
        [("base", base_hyps), ("row", row_hyps)], {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=samples
    )
    _, scores = test()
    return float(scores["BLEU"][1].p_value)


def combine_pvalues(pvalues: list[float]) -> float | None:
    """Fisher's method across seeds."""
    p = [x for x in pvalues if x is not None]
    if not p:
        return None
    if len(p) == 1:
        return p[0]
    return float(stats.combine_pvalues(np.clip(p, 1e-12, 1.0), method="fisher").pvalue)


def read_lines(path: Path) -> list[str] | None:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else None
