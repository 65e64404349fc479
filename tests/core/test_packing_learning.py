"""benchmarks/packing_learning.py's comparison: packed minus padded dev cross-entropy, "within seed noise" where
the Welch 95% interval holds 0; and each trial's line, also for a trial that timed out."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks.packing_learning import compare, trial_line


def test_the_difference_is_packed_minus_padded_and_noise_is_an_interval_holding_zero():
    padded = [4.656, 4.702, 4.678]
    same = compare(padded, [4.665, 4.696, 4.677])
    assert same["within_noise"] and same["low"] < 0 < same["high"]
    worse = compare(padded, [x + 0.3 for x in padded])
    assert not worse["within_noise"] and worse["diff"] == pytest.approx(0.3) and worse["low"] > 0
    better = compare(padded, [x - 0.3 for x in padded])
    assert not better["within_noise"] and better["diff"] == pytest.approx(-0.3) and better["high"] < 0
    ci = stats.ttest_ind([4.665, 4.696, 4.677], padded, equal_var=False).confidence_interval(0.95)
    assert (same["low"], same["high"]) == pytest.approx((ci.low, ci.high))
    assert same["sd_padded"] == pytest.approx(np.std(padded, ddof=1))


def test_a_trial_line_says_what_trained_or_why_nothing_did():
    done = {"status": "finished", "packing_asked": "on", "seed": 2, "dev_ce": 4.6963, "steps": 800,
            "target_tokens": 800 * 22_581, "packing": "flex", "packing_reason": "FlexAttention", "compile": "graphs",
            "device": "cuda", "precision": "bf16", "tokens_per_second": 265_000.4, "compile_seconds": 44.2}  # fmt: skip
    line = trial_line(done)
    assert line.startswith("packing on seed 2: dev cross-entropy 4.6963 at step 800, 22,581 target tokens a step")
    assert "layout flex (FlexAttention); compile graphs; cuda bf16; 265,000 target tokens/s" in line
    assert trial_line({"status": "timed out", "why": "after 320 s", "packing": "off", "seed": 3}) == (
        "packing off seed 3: timed out after 320 s"
    )
