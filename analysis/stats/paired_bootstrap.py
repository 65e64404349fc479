"""Sentence-sampling significance: sacrebleu's paired bootstrap per seed, combined across seeds (Fisher)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from analysis.data.files import read_text

HYP_BYTES = 256 << 20  # a test set's output: a few MB


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
    return float(scores["BLEU"][1].p_value)  # type: ignore[union-attr,arg-type]  # sacrebleu types it str | Result


def combine_pvalues(pvalues: list[float]) -> float | None:
    """Fisher's method across seeds."""
    p = [x for x in pvalues if x is not None]
    if not p:
        return None
    if len(p) == 1:
        return p[0]
    return float(stats.combine_pvalues(np.clip(p, 1e-12, 1.0), method="fisher").pvalue)


def read_lines(path: Path) -> list[str] | None:
    """The lines of a hypothesis or reference file; bytes that are not UTF-8 are replaced (U+FFFD), never fatal;
    None where there is none, or it is not a regular file within HYP_BYTES."""
    try:
        return read_text(path, HYP_BYTES).splitlines() if path.exists() else None
    except OSError:
        return None
