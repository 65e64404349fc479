"""The verdict engine on simulated tables with a known truth: error rates under the null, power, equivalence."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind

from analysis.claims import CLAIMS
from analysis.trajectory import regime, trajectories, trajectory_text, unstable
from analysis.verdicts import (
    Noise,
    Outcome,
    Verdict,
    compare,
    holm,
    judge_claim,
    judge_table,
    pooled_noise,
    seed_correlation,
    versus_base,
)

ROWS = [f"R{i}" for i in range(1, 10)]


def _table(rng, effects: dict, sigma=1.0, seeds=(2, 3), mean=20.0) -> dict:
    """{row: values} with 2-3 seeds per row; base plus ROWS; effects shift a row's mean."""
    out = {}
    for row in ["base"] + ROWS:
        n = int(rng.integers(seeds[0], seeds[1] + 1))
        out[row] = mean + effects.get(row, 0.0) + sigma * rng.standard_normal(n)
    return out


def _claim(a, rel, b, margin=None):
    return {"id": f"{a}{rel}{b}", "readings": ("dev_bleu",), "comparisons": [(a, rel, b)], "margin": margin}


def test_null_calibration_directional():
    """Zero true effect: 'agrees' or 'contradicts' for 5% +- 1.5% of comparisons."""
    rng = np.random.default_rng(0)
    decided = total = 0
    for _ in range(2000):
        values = _table(rng, {})
        noise = pooled_noise(values)
        for row in ROWS:
            res = judge_claim(_claim(row, "<", "base"), values, noise, "dev_bleu")
            decided += res.comparisons[0].outcome in (Outcome.AGREES, Outcome.CONTRADICTS)
            total += 1
    assert abs(decided / total - 0.05) <= 0.015, decided / total


def test_power_at_three_sigma_three_seeds():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(500):
        values = _table(rng, {"R1": -3.0}, seeds=(3, 3))
        res = judge_claim(_claim("R1", "<", "base"), values, pooled_noise(values), "dev_bleu")
        hits += res.verdict == Verdict.HELD
    assert hits / 500 >= 0.80, hits / 500


def test_contradiction_is_detected_on_the_other_side():
    rng = np.random.default_rng(2)
    values = _table(rng, {"R1": +5.0}, seeds=(3, 3))
    res = judge_claim(_claim("R1", "<", "base"), values, pooled_noise(values), "dev_bleu")
    assert res.verdict == Verdict.CONTRADICTED


def test_equivalence_at_the_margin_is_held_at_most_5_percent():
    rng = np.random.default_rng(3)
    margin, held = 1.0, 0
    for _ in range(2000):
        values = _table(rng, {"R1": margin}, sigma=0.5, seeds=(3, 3))
        res = judge_claim(_claim("R1", "~", "base", margin), values, pooled_noise(values), "dev_bleu")
        held += res.verdict == Verdict.HELD
    assert held / 2000 <= 0.05 + 0.01, held / 2000


def test_equivalence_is_shown_when_rows_are_equal_and_noise_is_small():
    rng = np.random.default_rng(4)
    held = 0
    for _ in range(200):
        values = _table(rng, {}, sigma=0.2, seeds=(3, 3))
        res = judge_claim(_claim("R1", "~", "base", 1.0), values, pooled_noise(values), "dev_bleu")
        held += res.verdict == Verdict.HELD
    assert held / 200 >= 0.8


def test_no_significant_difference_is_not_equivalence():
    """Large noise and no difference: '~' must come out within noise, not held (absence of evidence)."""
    values = {"base": np.array([18.0, 22.0]), "R1": np.array([17.0, 23.0])}
    res = judge_claim(_claim("R1", "~", "base", 1.0), values, pooled_noise(values), "dev_bleu")
    assert res.verdict == Verdict.WITHIN_NOISE


def test_best_of_selection_keeps_the_error_rate():
    """A1 < best of four equal rows: without the correction picking the best inflates the error."""
    rng = np.random.default_rng(5)
    decided = 0
    n = 2000
    for _ in range(n):
        values = _table(rng, {})
        res = judge_claim(_claim("R1", "<", "best:base,R2,R3,R4"), values, pooled_noise(values), "dev_bleu")
        decided += res.verdict in (Verdict.HELD, Verdict.CONTRADICTED)
    assert decided / n <= 0.05 + 0.01, decided / n


def test_holm_keeps_the_family_error_of_a_many_comparison_claim():
    rng = np.random.default_rng(6)
    claim = {"id": "C", "readings": ("dev_bleu",), "comparisons": [(r, "<", "base") for r in ROWS[:7]]}
    wrong = 0
    for _ in range(1000):
        values = _table(rng, {})
        res = judge_claim(claim, values, pooled_noise(values), "dev_bleu")
        wrong += any(c.outcome != Outcome.WITHIN_NOISE for c in res.comparisons)
    assert wrong / 1000 <= 0.05 + 0.015, wrong / 1000


def test_two_rows_match_scipy_and_statsmodels():
    """With only two rows the pooled test is the classic two-sample t-test, and '~' is statsmodels' TOST."""
    a, b = np.array([20.1, 21.3, 19.7]), np.array([22.0, 21.1, 23.4])
    values = {"a": a, "b": b}
    noise = pooled_noise(values)
    c = compare(values, noise, "a", "<", "b", "dev_bleu")
    assert c.p == pytest.approx(stats.ttest_ind(a, b, equal_var=True).pvalue, rel=1e-9)
    e = compare(values, noise, "a", "~", "b", "dev_bleu", margin=3.0)
    p_tost = ttost_ind(a, b, -3.0, 3.0, usevar="pooled")[0]
    assert e.p == pytest.approx(p_tost, rel=1e-9)


def test_holm_matches_statsmodels():
    rng = np.random.default_rng(7)
    for _ in range(8):  # each multipletests call runs gc.collect()
        p = list(rng.uniform(0, 0.08, size=int(rng.integers(2, 8))))
        assert holm(p, 0.05) == list(multipletests(p, alpha=0.05, method="holm")[0])


def test_one_seed_gets_no_verdict():
    """One seed per row: no noise estimate, so no held or not-held verdict whatever the gap."""
    df = pd.DataFrame(
        [
            {"row": r, "seed": 1, "status": "finished", "dev_bleu": v, "dev_ppl": 5.0 + v / 100, "test_bleu": v}
            for r, v in (("base", 20.0), ("D1", 12.0), ("D3", 25.0))
        ]
    )
    results = judge_table(df, CLAIMS)
    measured = [r for r in results if r.verdict != Verdict.NOT_MEASURED]
    assert measured and all(r.verdict == Verdict.NO_REPLICATES for r in measured)


def test_single_seed_row_is_compared_once_pooled_df_reaches_3():
    values = {"base": np.array([20.0, 20.2, 19.8]), "R2": np.array([20.1, 20.0]), "R1": np.array([15.0])}
    noise = pooled_noise(values)
    assert noise.df == 3 and noise.rows == 2
    assert compare(values, noise, "R1", "<", "base", "dev_bleu").outcome == Outcome.AGREES
    thin = {"base": np.array([20.0, 20.2]), "R1": np.array([15.0])}
    assert compare(thin, pooled_noise(thin), "R1", "<", "base", "dev_bleu").outcome == Outcome.NO_REPLICATES


def test_cross_entropy_reading_lower_is_better():
    values = {"base": np.log([5.0, 5.02, 4.98]), "D1": np.log([5.5, 5.52, 5.49])}
    c = compare(values, pooled_noise(values), "D1", "<", "base", "dev_ce")  # D1 worse: higher CE
    assert c.outcome == Outcome.AGREES


def test_noise_is_pooled_over_rows():
    values = {"a": np.array([1.0, 3.0]), "b": np.array([10.0, 10.0, 13.0]), "c": np.array([7.0])}
    n = pooled_noise(values)
    assert n.df == 3 and n.rows == 2
    assert n.sigma == pytest.approx(np.sqrt((2.0 + 6.0) / 3))
    assert isinstance(n, Noise)


# ---------------------------------------------------------------------------------------------- trajectory
def _write_trial(root, row, seed, curve, final_bleu, steps=300):
    """curve: [(step, dev_bleu or None, dev_ppl)], the last point is the final one."""
    wd = root / f"{row}-s{seed}"
    wd.mkdir(parents=True)
    with open(wd / "metrics.jsonl", "w") as f:
        for step, b, p in curve:
            f.write(json.dumps({"kind": "eval", "step": step, "steps": steps, "dev_bleu": b, "dev_ppl": p}) + "\n")
    return {
        "trial_id": f"{row}-s{seed}",
        "row": row,
        "seed": seed,
        "status": "finished",
        "workdir": str(wd),
        "steps": steps,
        "dev_bleu": final_bleu,
        "dev_ppl": curve[-1][2],
        "test_bleu": final_bleu,
    }


def test_trajectory_shows_a_contradiction_that_is_gone_by_the_end(tmp_path):
    """At 1/3 of the budget D1 (no dropout) beats base clearly; by the end the difference is noise: unstable."""
    recs = []
    for s, eps in zip((1, 2, 3), (-0.1, 0.0, 0.1)):
        recs.append(
            _write_trial(
                tmp_path, "base", s, [(100, 5 + eps, 30.0), (200, 8 + eps, 20.0), (300, 10 + eps, 15.0)], 10 + eps
            )
        )
        recs.append(
            _write_trial(
                tmp_path, "D1", s, [(100, 8 + eps, 25.0), (200, 9 - eps, 19.0), (300, 10 - eps, 15.0 + eps)], 10 - eps
            )
        )
    df = pd.DataFrame(recs)
    claim = [c for c in CLAIMS if c["id"] == "D-dropout-helps"]
    final, traj = trajectories(df, claim)
    path = traj[("D-dropout-helps", "dev_bleu")]
    assert [f for f, _ in path] == [0.333, 0.667, 1.0]
    assert path[0][1] == Verdict.CONTRADICTED and path[-1][1] == Verdict.WITHIN_NOISE
    text = trajectory_text(path)
    assert text.startswith("1/3 contradicts") and text.endswith("1 within noise")
    assert unstable(path)
    reg = regime(df)
    assert reg["undertrained"] is True  # ln 20 - ln 15 = 0.29 nats over the last third


def test_stable_verdict_and_trained_regime(tmp_path):
    recs = []
    for s, eps in zip((1, 2, 3), (-0.1, 0.0, 0.1)):
        recs.append(_write_trial(tmp_path, "base", s, [(150, 9 + eps, 15.1), (300, 10 + eps, 15.0)], 10 + eps))
        recs.append(_write_trial(tmp_path, "D1", s, [(150, 6 + eps, 16.0), (300, 7 + eps, 15.9)], 7 + eps))
    df = pd.DataFrame(recs)
    final, traj = trajectories(df, [c for c in CLAIMS if c["id"] == "D-dropout-helps"])
    path = traj[("D-dropout-helps", "dev_bleu")]
    assert [v for _, v in path] == [Verdict.HELD, Verdict.HELD] and not unstable(path)
    assert regime(df)["undertrained"] is False


def test_seed_correlation_recovers_a_shared_seed_effect():
    """Seed k moves every row alike by tau; correlation of deviations ~ tau^2 / (tau^2 + sigma^2)."""
    rng = np.random.default_rng(8)
    recs = []
    for sim in range(40):
        shared = rng.standard_normal(3) * 1.0  # tau = 1
        for row in ["base"] + ROWS:
            for s in range(3):
                v = 20 + shared[s] + rng.standard_normal()  # sigma = 1
                recs.append({"row": f"{row}", "seed": sim * 10 + s, "status": "finished", "dev_bleu": v})
    rho, n = seed_correlation(pd.DataFrame(recs), "dev_bleu")
    assert n == 40 * 3 * len(ROWS) and 0.35 < rho < 0.65  # truth 0.5 (deviations from row means)
    independent = pd.DataFrame(recs).assign(dev_bleu=lambda d: rng.standard_normal(len(d)))
    assert abs(seed_correlation(independent, "dev_bleu")[0]) < 0.15


def test_learning_curves_are_one_panel_per_group_with_base_in_each(tmp_path):
    from analysis.plots import curve_panels, panel_groups, row_curves

    recs = []
    for row, group in (("base", "base"), ("A1", "A"), ("D1", "D"), ("D3", "D")):
        for s in (1, 2):
            recs.append(_write_trial(tmp_path, row, s, [(100, None, 30.0 + s), (300, 5.0, 15.0 + s)], 5.0))
            recs[-1]["group"] = group
    df = pd.DataFrame(recs)
    t = pd.DataFrame({"row": ["base", "A1", "D1", "D3"], "group": ["base", "A", "D", "D"]})
    assert panel_groups(t) == ["A", "D"]
    curves = row_curves(df)
    assert set(curves) == {"base", "A1", "D1", "D3"}
    steps, mean, band = curves["D1"]
    assert list(steps) == [100, 300] and mean[0] == pytest.approx(np.log(31.5), abs=0.02) and band[0, 1] > band[0, 0]
    assert curve_panels(df, t)  # a PNG (base64)


def test_rows_against_base_keep_the_family_error():
    """Nine rows, no real effect, 2-3 seeds: the chance that any row is called better or worse than base
    (Holm over the rows) is <= 5% (+1.5% Monte Carlo slack, 2,000 tables)."""
    rng = np.random.default_rng(11)
    any_decided = 0
    for _ in range(2000):
        values = _table(rng, {})
        comps = versus_base(values, pooled_noise(values), ROWS, "dev_bleu")
        any_decided += any(c.outcome in (Outcome.AGREES, Outcome.CONTRADICTS) for c in comps)
    assert any_decided / 2000 <= 0.065, any_decided / 2000


def test_rows_against_base_find_a_real_effect_and_its_side():
    """One row 4 sigma better and one 4 sigma worse at 3 seeds, seven null rows: both found >= 80% of 500 tables,
    on the right side; a null row is called different in <= 5%."""
    rng = np.random.default_rng(12)
    better = worse = null_hits = 0
    for _ in range(500):
        values = _table(rng, {"R1": 4.0, "R2": -4.0}, seeds=(3, 3))
        comps = {c.a: c for c in versus_base(values, pooled_noise(values), ROWS, "dev_bleu")}
        better += comps["R1"].outcome == Outcome.AGREES
        worse += comps["R2"].outcome == Outcome.CONTRADICTS
        null_hits += sum(comps[r].outcome != Outcome.WITHIN_NOISE for r in ROWS[2:])
    assert better / 500 >= 0.8 and worse / 500 >= 0.8, (better, worse)
    assert null_hits / (500 * 7) <= 0.05, null_hits


# ---------------------------------------------------------------------------------------------- unequal seed spread
def _naive(values) -> Noise:
    """The pool without setting any row apart (what pooled_noise did before)."""
    ss = sum(float(((v - v.mean()) ** 2).sum()) for v in values.values() if len(v) >= 2)
    dof = sum(len(v) - 1 for v in values.values() if len(v) >= 2)
    return Noise(float(np.sqrt(ss / dof)), dof, sum(len(v) >= 2 for v in values.values()))


def test_a_row_with_a_far_larger_seed_spread_is_set_apart():
    """One row trains unstably (seed sd 8x the others', no real effect), one has a real 3 sigma effect, 3 seeds,
    1,000 tables.  Pooling everything calls the unstable row different from base in ~40% and finds the real
    effect in ~30%; setting it apart brings its error to ~8% (not 5%: with 3 seeds its spread is not always
    recognised, and then it is tested with the pool's) and finds the effect about as often (~91%) as a table
    without the unstable row (~92%)."""
    rng = np.random.default_rng(21)
    naive_err = err = naive_hits = hits = clean_hits = 0
    for _ in range(1000):
        values = _table(rng, {"R2": -3.0}, seeds=(3, 3))
        clean_noise = pooled_noise(values)
        clean_hits += judge_claim(_claim("R2", "<", "base"), values, clean_noise, "dev_bleu").verdict == Verdict.HELD
        values["R1"] = 20.0 + 8.0 * rng.standard_normal(3)
        noise = pooled_noise(values)
        for nz, counts in ((noise, "new"), (_naive(values), "naive")):
            wrong = judge_claim(_claim("R1", "<", "base"), values, nz, "dev_bleu").verdict != Verdict.WITHIN_NOISE
            found = judge_claim(_claim("R2", "<", "base"), values, nz, "dev_bleu").verdict == Verdict.HELD
            if counts == "new":
                err, hits = err + wrong, hits + found
            else:
                naive_err, naive_hits = naive_err + wrong, naive_hits + found
    assert naive_err / 1000 > 0.30 and err / 1000 <= 0.11, (naive_err, err)  # 0.405 -> 0.082 measured
    assert hits >= naive_hits + 400 and hits >= clean_hits - 40, (hits, naive_hits, clean_hits)  # 914, 298, 924


def test_equal_spreads_are_rarely_set_apart_and_a_two_row_pool_is_untouched():
    rng = np.random.default_rng(22)
    apart = sum(bool(pooled_noise(_table(rng, {})).apart) for _ in range(1000))
    assert apart / 1000 <= 0.065, apart / 1000
    values = {"a": np.array([1.0, 9.0]), "b": np.array([5.0, 5.1])}  # two rows: nothing to test against
    assert pooled_noise(values).apart == ()


def test_a_row_set_apart_is_compared_with_welch():
    values = {"base": np.array([20.0, 20.2, 19.9]), "R1": np.array([20.1, 20.0, 19.8]),
              "R2": np.array([19.9, 20.1, 20.0]), "R3": np.array([10.0, 30.0, 21.0])}  # fmt: skip
    noise = pooled_noise(values)
    assert [r for r, *_ in noise.apart] == ["R3"] and noise.df == 6
    c = compare(values, noise, "R3", "<", "base", "dev_bleu")
    ua, ub = values["R3"].var(ddof=1) / 3, noise.sigma**2 / 3
    dof = (ua + ub) ** 2 / (ua**2 / 2 + ub**2 / 6)
    assert c.p == pytest.approx(2 * stats.t.sf(abs(c.diff) / np.sqrt(ua + ub), dof), rel=1e-9)
    mean, half, n = noise.mean_ci(values["R3"], "R3")
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * values["R3"].std(ddof=1) / np.sqrt(3))


def test_two_pooled_rows_keep_the_pooled_df_whatever_the_rounding():
    """sigma * sigma and sigma ** 2 differ in the last bit for some sigmas: rows in the pool must still get the
    pooled t-test's df (not Welch's, about twice as many)."""
    from analysis.verdicts import standard_error

    noise = Noise(0.9503546630566793, 18, 18)
    assert noise.sigma * noise.sigma != noise.sigma**2
    se, dof = standard_error(noise, "a", 2, "b", 2)
    assert dof == 18 and se == pytest.approx(noise.sigma)
    apart = Noise(0.5, 18, 18, (("a", 4.0, 1, 1e-6), ("b", 3.0, 1, 1e-5)))
    se, dof = standard_error(apart, "a", 2, "b", 2)  # both set apart: Welch on their own spreads
    assert se == pytest.approx(np.sqrt((16 + 9) / 2)) and dof == pytest.approx((12.5**2) / (8**2 + 4.5**2))
