"""Issue 44: the whole printed report is one family, a budget stop is charged every planned look, "detectable" and
"could decide" carry the verdict's multiplicity, zero variances are offset as limma does, the '~' test reads off
its interval.  Simulated tables with a known truth; each test also shows (or names) the rate without the
correction it guards, outside its band."""

import json
import sys

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

import analysis.stats.seed_noise as seed_noise
from analysis.data.collect import collect
from analysis.report.evalsets import report_rule
from analysis.report.model import build
from analysis.stats.comparisons import Outcome, _equivalence, compare
from analysis.stats.family import decide
from analysis.stats.rule import Rule
from analysis.stats.seed_noise import pooled_noise
from analysis.stats.stability import unstable_line
from analysis.stats.verdicts import judge_table
from benchmarks import simulate as sim
from tests.analysis.test_analysis import make_sweep
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from verdict_calibration import adaptive_null, detectable_power, looks_taken, zero_row_power  # noqa: E402


# ------------------------------------------------------------------------------------------- one family
def _with_named_set(sweep, shift=0.0):
    """Every finished trial of the fixture sweep scored on a named set (evals/wmt-x.json), BLEU = dev - 2."""
    for result in sweep.glob("trials/*/result.json"):
        r = json.loads(result.read_text())
        if r.get("status") != "finished":
            continue
        rec = {"fingerprint": "abc", "config_hash": r.get("config_hash"), "bleu": r["dev_bleu"] - 2 + shift,
               "chrf": 50.0 + r["dev_bleu"], "ppl": r["dev_ppl"], "set": "x", "sentences": 10}  # fmt: skip
        (result.parent / "evals").mkdir(exist_ok=True)
        (result.parent / "evals" / "wmt-x.json").write_text(json.dumps(rec))
    return sweep


def test_the_printed_report_decides_dev_test_and_named_sets_as_one_family(tmp_path):
    """The report's rule carries the cutoff of BH over every comparison it prints (dev claims, rows against base,
    test and the named set): statsmodels' BH over that union rejects exactly the p at or under it, each printed
    table is decided at it, and the header names the family's size.  Without report_rule (each set's claims a
    family of their own, the rule before) the model's rule has no cutoff and this fails."""
    sweep = _with_named_set(make_sweep(tmp_path / "s"))
    model = build(sweep, samples=20)
    assert model.rule.cutoff is not None and f"{model.rule.size} comparisons" in model.rule.describe()
    df = collect(sweep)
    undecided = Rule(cutoff=1.0)
    p = []
    from analysis.data.claims import table3_claims
    from analysis.report.evalsets import _printed, set_claims, with_set_columns
    from analysis.report.tables import unclaimed_rows

    p += [c.p for c in _printed(judge_table(df, table3_claims(), undecided, unclaimed_rows(df)))]
    full, names, _ = with_set_columns(df.assign(workdir=[str(sweep / w) for w in df["workdir"]]))
    assert names == ["wmt-x"]
    for s in ["test", *names]:
        p += [c.p for c in _printed(judge_table(full, set_claims(s), undecided))]
    p = [x for x in p if x == x]
    assert model.rule.size == len(p)
    want = multipletests(p, alpha=0.05, method="fdr_bh")[0]
    assert list(np.array(p) <= model.rule.cutoff) == list(want)
    printed = sum(e.count(": agrees") + e.count(": contradicts") for e in model.claims["evidence"])
    printed += sum(
        e.count(": agrees") + e.count(": contradicts") for t in model.set_claims.values() for e in t["evidence"]
    )
    printed += int(model.versus["outcome"].isin(["better than base", "worse than base"]).sum()) if len(
        model.versus) else 0  # fmt: skip
    assert printed == int(want.sum())
    assert report_rule(df, sweep, Rule(family="claim")).cutoff is None  # --family claim: each alone, as stated


def test_whole_report_null_rate_through_the_engine():
    """Complete null, the demo's shape with test and one named set judged beside dev (2 seeds): the share of
    reports printing at least one false decided comparison (inside a "within noise" verdict too) stays <= 5%
    (measured 1.5-2.5%: benchmarks/results/verdict_calibration.txt; the slow test below holds it to a band)."""
    rng = np.random.default_rng(44)
    shape = sim.Shape(seeds=2, sets=("test", "wmt-x"))
    n = 60
    one = sum(sim.report_errors(rng, shape, Rule())["false"] > 0 for _ in range(n))
    assert one / n <= 0.05, one


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [2, 3])
def test_whole_report_null_rate_is_at_most_5_percent(seeds):
    """1,000 null reports with test and three named sets: one family <= 5% (+ Monte Carlo), each table its own
    family (the rule before) clearly above it."""
    rng = np.random.default_rng(440 + seeds)
    shape = sim.Shape(seeds=seeds, sets=("test", "s1", "s2", "s3"))
    one = apart = 0
    n = 1000
    for _ in range(n):
        values = sim.table(rng, shape)
        one += sim.report_errors(rng, shape, Rule(), values=values)["false"] > 0
        apart += sim.report_errors(rng, shape, Rule(), values=values, per_table=True)["false"] > 0
    print(f"\nwhole report, test + 3 named sets, {seeds} seeds: one family {one / n:.3f}, each table {apart / n:.3f}")
    assert 0.005 <= one / n <= 0.05, one / n
    assert apart / n >= 0.05, apart / n


# ------------------------------------------------------------------------------------------- budget stops
def test_a_budget_stop_through_the_real_loop_keeps_each_comparison_at_alpha():
    """The real adaptive loop (sweeps.run.adaptive.seed_rounds, min 2 max 5 seeds, 7 claims R < base, each decided
    alone) under a budget of 1 trial: the first round runs only where exactly one row is undecided, so the data
    choose the stop.  Every planned look charged, each null comparison is falsely decided in a band around the
    measured 1.2% (600 sweeps); charged only the looks taken (the rule before), 5.2%: above alpha, outside it."""
    rng = np.random.default_rng(45)
    charged = adaptive_null(rng, 200, budget_trials=1)["per_comparison"]
    assert 0.002 <= charged <= 0.03, charged
    taken = adaptive_null(rng, 200, budget_trials=1, charge=looks_taken)["per_comparison"]
    assert taken > 0.035, taken  # the correction removed: outside the band above


# ------------------------------------------------------------------------------------------- detectable
def test_the_detectable_difference_has_its_power_with_looks_and_a_family():
    """At 10 looks in a family whose threshold is alpha/30, a true difference of the printed 'detectable' (its raw p
    tested at alpha/300) is found in a band around the measured 77% (nominal 80%: the standard error varies from
    table to table); with the threshold compared to the raw p (no x looks, the code before) the printed
    difference is a quarter smaller and found about half the time."""
    rng = np.random.default_rng(46)
    rule = Rule(looks=10, cutoff=0.05 / 30, size=30)
    d, power = detectable_power(rng, 3, rule, 300, calibration=60)
    assert 0.68 <= power <= 0.88, (d, power)
    import analysis.stats.comparisons as v

    old = v.raw_level
    v.raw_level = lambda c: min(c.threshold, c.level)  # the level before: the threshold on the raw p
    try:
        d_old, power_old = detectable_power(rng, 3, rule, 200, calibration=60)
    finally:
        v.raw_level = old
    assert d_old < 0.85 * d and power_old < 0.6, (d_old, power_old)


# ------------------------------------------------------------------------------------------- zero variances
def test_a_row_with_identical_seeds_does_not_sink_every_other_rows_power(monkeypatch):
    """Another row at 3 sd (2 seeds) is found in a band around the measured 68% (73% without the constant row);
    with the zero floored at 1e-300 (the code before) the prior's d0 collapses and power falls to ~20%."""
    rng = np.random.default_rng(47)
    power = zero_row_power(rng, 2, 250)
    assert 0.58 <= power <= 0.80, power
    monkeypatch.setattr(seed_noise, "offset_zeros", lambda s2: np.maximum(s2, 1e-300))
    assert zero_row_power(rng, 2, 150) < 0.40


# ------------------------------------------------------------------------------------------- '~'
def test_beyond_the_margin_is_exact_at_alpha_and_reads_off_the_interval():
    """'Differs by more than the margin' at a true difference of exactly the margin is decided in a band around
    alpha (the two-sided p before, 2 x min, held it near alpha / 2: it needed the 95% interval while the claim
    prints the 90% one); and wherever it is decided, the printed 1 - 2 alpha interval lies outside the margin."""
    rng = np.random.default_rng(48)
    margin, se, dof = 1.0, 0.6, 200.0
    diffs = margin + se * rng.standard_normal(4000)
    ps = np.array([_equivalence(d, se, dof, margin) for d in diffs], dtype=object)
    beyond = [p <= 0.05 and not agrees for p, agrees in ps]
    assert 0.04 <= np.mean(beyond) <= 0.06, np.mean(beyond)
    t = 1.6525  # t(0.95, 200)
    for d, hit in zip(diffs, beyond):
        if hit:
            assert abs(d) - t * se > margin - 1e-3


# ------------------------------------------------------------------------------------------- unstable
# ------------------------------------------------------------------------------------------- through the report
def _rewrite(sweep, values: dict) -> None:
    """Every finished trial's readings replaced by ``values`` ({reading: {row: seed values}}): dev and test in
    result.json, the named set wmt-x in evals/wmt-x.json."""
    for result in sweep.glob("trials/*/result.json"):
        r = json.loads(result.read_text())
        trial = json.loads((result.parent / "trial.json").read_text())
        row, k = trial["row"], trial["seed"] - 1
        r.update(dev_bleu=values["dev_bleu"][row][k], dev_ppl=float(np.exp(values["dev_ce"][row][k])),
                 test_bleu=values["test:bleu"][row][k], test_chrf=values["test:chrf"][row][k],
                 test_ppl=float(np.exp(values["test:ce"][row][k])))  # fmt: skip
        result.write_text(json.dumps(r))
        rec = {"fingerprint": "abc", "config_hash": r.get("config_hash"), "set": "x", "sentences": 10,
               "bleu": values["wmt-x:bleu"][row][k], "chrf": values["wmt-x:chrf"][row][k],
               "ppl": float(np.exp(values["wmt-x:ce"][row][k]))}  # fmt: skip
        (result.parent / "evals").mkdir(exist_ok=True)
        (result.parent / "evals" / "wmt-x.json").write_text(json.dumps(rec))


def _printed_decisions(model) -> int:
    tables = [model.claims, *model.set_claims.values()]
    n = sum(e.count(": agrees") + e.count(": contradicts") for t in tables for e in t["evidence"])
    return n + int(model.versus["outcome"].isin(["better than base", "worse than base"]).sum())


def _demo_sweep(root, seeds: int):
    return make_sweep(root, {r: {s + 1: (20.0, 7.0) for s in range(seeds)} for r in sim.DEMO_ROWS})


def test_the_printed_report_decides_what_the_simulation_counts(tmp_path):
    """A sweep of the demo's shape rewritten with a simulated table (dev, test, a named set) and reported by
    report_model.build (what `tsweep report` draws) prints exactly the decided comparisons that
    simulate.report_errors counts on the same table: the calibration's whole-report figures are the report's."""
    rng = np.random.default_rng(49)
    shape = sim.Shape(seeds=2, sets=("test", "wmt-x"))
    sweep = _demo_sweep(tmp_path / "s", 2)
    for effects in ({}, {"C3": 3.0, "B1": -3.0, "D2": 4.0}):
        values = sim.table(rng, shape, effects)
        _rewrite(sweep, values)
        model = build(sweep, samples=10)
        want = sim.report_errors(rng, shape, Rule(), effects, values=values)
        assert _printed_decisions(model) == want["decided"], effects
        assert model.rule.size == want["tested"]


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [2, 3])
def test_null_reports_through_the_report_stay_under_5_percent(tmp_path, seeds):
    """200 null sweeps of the demo's shape (dev, test, a named set) reported through report_model.build: the
    share printing any decided comparison other than a held '~' stays <= 5% (+ Monte Carlo)."""
    rng = np.random.default_rng(500 + seeds)
    shape = sim.Shape(seeds=seeds, sets=("test", "wmt-x"))
    sweep = _demo_sweep(tmp_path / "s", seeds)
    bad = 0
    for _ in range(200):
        values = sim.table(rng, shape)
        _rewrite(sweep, values)
        model = build(sweep, samples=10)
        tables = [model.claims, *model.set_claims.values()]
        wrong = sum(e.count(": contradicts") + e.count(": agrees") - e.count("E1 vs base: agrees")
                    for t in tables for e in t["evidence"])  # fmt: skip
        wrong += int(model.versus["outcome"].isin(["better than base", "worse than base"]).sum())
        bad += wrong > 0
    print(f"\nnull reports through report_model.build, {seeds} seeds: {bad / 200:.3f} with a false decided comparison")
    assert bad / 200 <= 0.07, bad


# ------------------------------------------------------------------------------------------- P(A > B)
def test_probability_of_improvement_is_the_pairs_share_and_unbiased():
    """P(a better) printed with each comparison: the share of seed pairs where a's seed is better (ties half), on
    the quality side of the reading (lower cross-entropy is better); averaged over tables with a known shift of
    1 sd it sits in a band around the truth Phi(1 / sqrt(2)) = 0.760."""
    from scipy import stats

    from analysis.stats.comparisons import improvement

    a, b = np.array([1.0, 3.0, 5.0]), np.array([2.0, 3.0])
    pairs = [0, 0, 1, 0.5, 1, 1]  # (1,2) (1,3) (3,2) (3,3) (5,2) (5,3)
    assert improvement(a, b, "dev_bleu") == pytest.approx(sum(pairs) / 6)
    assert improvement(a, b, "dev_ce") == pytest.approx(1 - sum(pairs) / 6)
    rng = np.random.default_rng(49)
    for na, nb in ((2, 2), (3, 5), (4, 1)):  # scipy's Mann-Whitney U over the pairs, ties included
        va, vb = rng.integers(0, 4, na).astype(float), rng.integers(0, 4, nb).astype(float)
        u = stats.mannwhitneyu(va, vb, method="asymptotic").statistic
        assert improvement(va, vb, "dev_bleu") == u / (na * nb)
    rng = np.random.default_rng(50)
    shape = sim.Shape(seeds=3, sigma={"dev_bleu": 1.0})
    probs = []
    for _ in range(400):
        v = sim.table(rng, shape, {"C4": 1.0})["dev_bleu"]
        c = compare(v, pooled_noise(v), "C4", ">", "base", "dev_bleu")
        probs.append(c.prob)
        assert f"P(C4 better) {c.prob:.2f}" in c.detail
    truth = stats.norm.cdf(1 / np.sqrt(2))
    assert abs(np.mean(probs) - truth) <= 0.03, (np.mean(probs), truth)


def test_the_header_counts_the_unstable_flags_of_a_report_judged_over_its_budget(tmp_path):
    """D1 beats base at 1/3 of the budget and not at the end (flagged): the header's line counts it among the
    claim-readings judged over the budget, with the comparisons they hold and the flags expected by chance."""
    import pandas as pd

    from analysis.report.tables import judge_report
    from analysis.stats.stability import unstable_counts
    from tests.analysis.test_verdicts import _write_trial

    recs = []
    for s, eps in zip((1, 2, 3), (-0.1, 0.0, 0.1)):
        recs.append(_write_trial(tmp_path, "base", s, [(100, 5 + eps, 30.0), (200, 8 + eps, 20.0),
                                                       (300, 10 + eps, 15.0)], 10 + eps))  # fmt: skip
        recs.append(_write_trial(tmp_path, "D1", s, [(100, 8 + eps, 25.0), (200, 9 - eps, 19.0),
                                                     (300, 10 - eps, 15.0 + eps)], 10 - eps))  # fmt: skip
    claims, versus = judge_report(pd.DataFrame(recs))
    counts = unstable_counts(claims, versus)
    assert counts["flagged"] >= 1 and counts["units"] >= counts["flagged"]
    assert counts["comparisons"] >= counts["units"]
    assert f"{counts['flagged']} of {counts['units']}" in unstable_line(counts["flagged"], counts["units"], 10)


def test_could_decide_uses_the_verdicts_level():
    """A comparison within noise whose observed difference would pass the family's threshold on the raw p at the
    maximum seeds, but not that threshold divided by the looks (what the verdict will test), gets no more seeds;
    with the level before (the threshold on the raw p) it did."""
    import analysis.stats.adaptive_seeds as loop
    import analysis.stats.comparisons as v

    rule = Rule(looks=4, cutoff=0.05 / 10, size=10)
    rows = {r: np.array([20.0 + 0.5 * k, 20.0 - 0.5 * k, 20.0]) for k, r in enumerate(["x1", "x2", "x3", "x4"], 1)}
    found = []
    for d in np.linspace(0.5, 4.0, 71):
        values = {**rows, "base": np.array([19.5, 20.5, 20.0]), "R1": np.array([19.5, 20.5, 20.0]) - d}
        noise = pooled_noise(values)
        c = compare(values, noise, "R1", "<", "base", "dev_bleu", rule=rule)
        decide([c], rule)
        if c.outcome != Outcome.WITHIN_NOISE:
            continue
        now = loop._could_decide(c, noise, (3, 3), (5, 5), rule)
        old = v.raw_level
        v.raw_level = loop.raw_level = lambda c: min(c.threshold, c.level)  # the loop's level and the verdict's
        try:
            before = loop._could_decide(c, noise, (3, 3), (5, 5), rule)
        finally:
            v.raw_level = loop.raw_level = old
        found.append((now, before))
    assert (False, True) in found  # decisive only at the lax level: no seed added now
    assert all(b or not n for n, b in found)  # the verdict's level is never the laxer
