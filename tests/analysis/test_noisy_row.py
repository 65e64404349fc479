"""A row at 3x the others' seed sd in the whole printed report (issue 54 item 3): how often it is falsely decided.

benchmarks/verdict_calibration.py --noisy-row measures it over thousands of reports
(benchmarks/results/noisy_row_report.txt); this test holds a seeded 250 of them in a two-sided band.
"""

from __future__ import annotations

import numpy as np

from analysis import simulate as sim
from analysis.verdicts import Rule

REPORTS = 250


def _rate(rule: Rule, seed: int = 3) -> float:
    """The share of REPORTS simulated reports (dev, test, rows against base; D1 at 3x, no effect; 2 seeds a row)
    in which a comparison involving D1 is decided."""
    rng = np.random.default_rng(seed)
    shape = sim.Shape(seeds=2, sets=("test",), spread={"D1": 3.0})
    return float(np.mean([sim.row_errors(rng, shape, rule, "D1")["any"] for _ in range(REPORTS)]))


def test_a_3x_row_in_the_whole_report_at_2_seeds():
    """Charged 2 looks (seeds {min: 2, max: 3}, the loop looked), as a Table 3 sweep's report is: about 7.3% over
    4,500 reports (its 95% interval 6.6-8.1%); 250 here are held in 3-12.5% (about 3 standard errors each side)."""
    now = _rate(Rule(looks=2))
    assert 0.03 <= now <= 0.125, now
