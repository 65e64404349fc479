"""One-sided comparisons against a margin: 'A >= B' (A no worse than B by more than the margin: non-inferiority) and
its mirror 'A <= B', parsed from a spec's claims and tested like '~' (a known truth, statsmodels' and scipy's tests)."""

import math

import numpy as np
import pytest
from scipy import stats

from analysis.data.claims import parse_claims
from analysis.stats.comparisons import Outcome, compare
from analysis.stats.evalues import calibrated
from analysis.stats.rule import Rule
from analysis.stats.seed_noise import pooled_noise
from analysis.stats.verdicts import Verdict
from tests.analysis.test_verdicts import _claim, _table, judge_claim
from transformer_core.errors import UserError

ROWS = ["base", "learned", "pre"]


def test_a_users_non_inferiority_claim_parses_and_needs_a_margin():
    (c,) = parse_claims([{"id": "learned-ok", "compare": "learned >= base", "margin": 1.0}], ROWS)
    assert c.comparisons == (("learned", ">=", "base"),) and c.margin == 1.0 and c.text == "learned no worse than base"
    (m,) = parse_claims([{"id": "m", "compare": "pre<=base", "margin": {"dev_bleu": 1, "dev_ce": 0.02}}], ROWS)
    assert m.comparisons == (("pre", "<=", "base"),) and m.margin_for("dev_ce") == 0.02
    refusals = [
        ({"id": "x", "compare": "learned >= base"}, "needs a margin"),
        ({"id": "x", "compare": "learned >= best of base, pre", "margin": 1}, "'best of' takes '<' or '>'"),
        ({"id": "x", "compare": "learned => base", "margin": 1}, "'ROW >= ROW' (no worse)"),
        ({"id": "x", "compare": "learned < base", "margin": 1}, "a margin is for '~', '>=' and '<='"),
    ]
    for raw, needle in refusals:
        with pytest.raises(UserError, match=None) as err:
            parse_claims([raw], ROWS)
        assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_two_rows_match_scipys_one_sided_t_test_on_either_readings_direction():
    a, b = np.array([20.1, 21.3, 19.7]), np.array([20.6, 21.1, 21.4])
    values, margin = {"a": a, "b": b}, 1.0
    noise = pooled_noise(values)
    c = compare(values, noise, "a", ">=", "b", "dev_bleu", margin=margin)
    want = stats.ttest_ind(a + margin, b, equal_var=True, alternative="greater").pvalue
    assert c.outcome == Outcome.AGREES and c.p == pytest.approx(want, rel=1e-9)
    ce = compare(values, noise, "a", ">=", "b", "dev_ce", margin=margin)  # lower is better: a no worse means a - m <= b
    assert ce.p == pytest.approx(stats.ttest_ind(a - margin, b, equal_var=True, alternative="less").pvalue, rel=1e-9)
    mirror = compare(values, noise, "b", "<=", "a", "dev_bleu", margin=margin)  # b no better than a: a no worse than b
    assert mirror.p == pytest.approx(c.p, rel=1e-9) and mirror.outcome == Outcome.AGREES
    e = compare(values, noise, "a", ">=", "b", "dev_bleu", margin=margin, rule=Rule(evidence="e"))
    assert e.e == pytest.approx(calibrated(e.p)) and "margin 1.0" in c.detail


def test_non_inferiority_at_the_margin_is_held_at_most_5_percent():
    """The row truly worse by exactly the margin: 'no worse' held in at most 5% (+1%) of 2,000 tables."""
    rng = np.random.default_rng(53)
    margin, held = 1.0, 0
    for _ in range(2000):
        values = _table(rng, {"R1": -margin}, sigma=0.5, seeds=(3, 3))
        res = judge_claim(_claim("R1", ">=", "base", margin), values, pooled_noise(values), "dev_bleu")
        held += res.verdict == Verdict.HELD
    assert held / 2000 <= 0.05 + 0.01, held / 2000


def test_a_clearly_better_row_is_held_where_about_equal_contradicts_it():
    rng = np.random.default_rng(54)
    values = _table(rng, {"R1": +5.0}, sigma=0.5, seeds=(3, 3))
    noise = pooled_noise(values)
    assert judge_claim(_claim("R1", ">=", "base", 1.0), values, noise, "dev_bleu").verdict == Verdict.HELD
    assert judge_claim(_claim("R1", "~", "base", 1.0), values, noise, "dev_bleu").verdict == Verdict.CONTRADICTED
    worse = _table(rng, {"R1": -5.0}, sigma=0.5, seeds=(3, 3))  # worse far beyond the margin
    res = judge_claim(_claim("R1", ">=", "base", 1.0), worse, pooled_noise(worse), "dev_bleu")
    assert res.verdict == Verdict.CONTRADICTED and not math.isnan(res.comparisons[0].p)


def test_equal_rows_are_shown_no_worse_with_small_noise():
    rng = np.random.default_rng(55)
    held = 0
    for _ in range(200):
        values = _table(rng, {}, sigma=0.2, seeds=(3, 3))
        held += judge_claim(_claim("R1", ">=", "base", 1.0), values, pooled_noise(values), "dev_bleu").verdict == (
            Verdict.HELD
        )
    assert held / 200 >= 0.9, held / 200


def test_adaptive_seeds_see_that_more_seeds_could_show_no_worse():
    """Equal rows, noisy at two seeds: within noise now; at ten seeds a row each the one-sided test would decide
    (the directional rule, |diff| beyond its critical value, would say no)."""
    from analysis.stats.adaptive_seeds import _could_decide
    from analysis.stats.family import decide

    values = {"a": np.array([20.0, 21.6]), "b": np.array([21.6, 20.0])}
    noise = pooled_noise(values)
    c = compare(values, noise, "a", ">=", "b", "dev_bleu", margin=1.0)
    decide([c], Rule())
    assert c.outcome == Outcome.WITHIN_NOISE
    assert _could_decide(c, noise, (2, 2), (10, 10), Rule())
