"""A row at 3x the others' seed sd in the whole printed report (issue 54 item 3): how often it is falsely decided.

benchmarks/verdict_calibration.py --noisy-row measures it over thousands of reports
(benchmarks/results/noisy_row_report.txt); these tests hold seeded reports in two-sided bands, with the row's spread
shared over a table's readings (seed_noise.shared_spread).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.report import simulate as sim
from analysis.stats.seed_noise import pooled_noise, table_noise
from analysis.stats.verdicts import Rule

REPORTS = 250


def _rate(rule: Rule, seed: int = 3) -> float:
    """The share of REPORTS simulated reports (dev, test, rows against base; D1 at 3x, no effect; 2 seeds a row)
    in which a comparison involving D1 is decided."""
    rng = np.random.default_rng(seed)
    shape = sim.Shape(seeds=2, sets=("test",), spread={"D1": 3.0})
    return float(np.mean([sim.row_errors(rng, shape, rule, "D1")["any"] for _ in range(REPORTS)]))


def test_a_3x_row_in_the_whole_report_at_2_seeds():
    """Charged 2 looks (seeds {min: 2, max: 3}, the loop looked), as a Table 3 sweep's report is: 6.5% [5.1, 8.2]
    of 1,000 reports with the spread shared over each table's readings (8.5% [6.9, 10.4] on the same draws with
    each reading alone: benchmarks/results/noisy_row_report.txt); 250 seeded reports are held in 2.5-11.5% (about
    2.5 standard errors each side).  Too close to the rule before for 250 reports to tell them apart: the next
    test is the one that fails with the sharing removed."""
    now = _rate(Rule(looks=2))
    assert 0.025 <= now <= 0.115, now


def test_a_row_whose_seeds_agree_on_one_reading_keeps_its_spread_there():
    """D1's two seeds 3x apart on every reading of a table but one, where they happen to agree: that reading alone
    shrinks D1 to the prior; the table's readings together floor it there at its mean spread ratio (and leave an
    ordinary row alone).  Fails with shared_spread removed."""
    rng = np.random.default_rng(0)
    rows = [f"r{k}" for k in range(18)] + ["D1"]
    readings = ("bleu", "chrf", "ce")
    deviations = rng.standard_normal((len(rows), 2))  # the seeds' deviations, alike on every reading (rho 1)
    values = {m: {row: 20.0 + deviations[k] for k, row in enumerate(rows)} for m in readings}
    for m in ("chrf", "ce"):
        values[m]["D1"] = np.array([20.0 - 3.0, 20.0 + 3.0])
    values["bleu"]["D1"] = np.array([20.0 - 0.1, 20.0 + 0.1])
    alone = pooled_noise(values["bleu"])
    shared = table_noise(values)
    assert "D1" not in dict(alone.floored)
    assert shared["bleu"].spread("D1")[0] > 5 * alone.spread("D1")[0]
    assert shared["bleu"].shared == ("D1",) and "D1" in dict(shared["chrf"].floored)
    assert shared["bleu"].spread("r0") == alone.spread("r0")
    assert "over the table's readings" in shared["bleu"].describe()


@pytest.mark.parametrize("model", ["pooled"])
def test_no_sharing_outside_the_moderated_model(model):
    """The pooled model (one variance for every row) is left as it is."""
    rng = np.random.default_rng(1)
    values = {m: {f"r{k}": rng.standard_normal(2) for k in range(10)} for m in ("a", "b")}
    assert table_noise(values, model) == {m: pooled_noise(v, model) for m, v in values.items()}
