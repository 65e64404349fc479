"""The search report: each sampled configuration a row of its own, the expected best of n (Dodge et al. 2019),
importance, confirmation with fresh seeds, plots (a real smoke search rendered end to end:
tests/e2e/test_search_report_e2e.py)."""

import itertools
import json
import math

import numpy as np
import optuna
import pandas as pd
import pytest

from analysis.data.collect import collect
from analysis.data.samples import sample_label
from analysis.stats.search import (
    Objective,
    best_so_far,
    configurations,
    expected_best,
    expected_max,
    importance,
)
from analysis.stats.search_verdicts import confirmation_lines, confirmation_table, pareto_front
from tests.helpers import ROOT

SEARCH_SPEC = ROOT / "tests" / "specs" / "search-smoke.yaml"
BLEU = Objective("dev_bleu", "max")


def test_expected_max_matches_enumeration_of_every_draw():
    """E[max of n draws with replacement] from the empirical CDF equals the mean over all N^n draws."""
    scores = [3.0, 1.0, 4.0, 1.5, 9.0]
    for n in (1, 2, 3):
        draws = [max(d) for d in itertools.product(scores, repeat=n)]
        mean, sd = expected_max(scores, n)
        assert mean == pytest.approx(np.mean(draws)) and sd == pytest.approx(np.std(draws))
    assert expected_max([1.0, 2.0, 3.0], 2)[0] == pytest.approx(22 / 9)  # 1/9 + 2 * 3/9 + 3 * 5/9
    assert expected_max(scores, 1)[0] == pytest.approx(np.mean(scores))
    assert expected_max(scores, 200)[0] == pytest.approx(9.0, abs=1e-9)


def test_expected_best_of_a_minimised_objective_is_the_expected_minimum():
    configs = pd.DataFrame({"sample": list("abc"), "dev_ppl": [10.0, 20.0, 30.0]})
    evp = expected_best(configs, Objective("dev_ppl", "min"))
    assert list(evp["n"]) == [1, 2, 3]
    assert evp["expected_best"].iloc[0] == pytest.approx(20.0)
    pairs = [min(a, b) for a in (10, 20, 30) for b in (10, 20, 30)]
    assert evp["expected_best"].iloc[1] == pytest.approx(np.mean(pairs))
    assert evp["expected_best"].is_monotonic_decreasing


def _trial(tid, sampled, seed, bleu, status="finished", started=0.0, group="search"):
    label = sample_label(sampled)
    return {"trial_id": tid, "group": group, "row": label, "seed": seed, "sample": label, "sampled": sampled,
            "started": started, "status": status, "dev_bleu": bleu, "wall_seconds": 10.0, "train_flops": 1e9,
            "step": 20}  # fmt: skip


def test_each_sample_is_its_own_configuration_and_seeds_are_never_pooled_across_samples():
    a, b = {"lr_scale": 0.5, "warmup": 5}, {"lr_scale": 2.0, "warmup": 10}
    df = pd.DataFrame([
        _trial("t1", a, 1, 10.0, started=1), _trial("t2", b, 1, 20.0, started=2), _trial("t3", a, 2, 12.0, started=3),
        _trial("t4", b, 2, 0.0, status="diverged", started=4),
        _trial("t5", a, 7, 99.0, started=5, group="confirm"),  # a confirmation run is not a search sample's seed
    ])  # fmt: skip
    c = configurations(df, [BLEU]).set_index("sample")
    assert list(c.index) == [sample_label(a), sample_label(b)] and c.attrs["params"] == ["lr_scale", "warmup"]
    ra, rb = c.loc[sample_label(a)], c.loc[sample_label(b)]
    assert ra["dev_bleu"] == 11.0 and ra["dev_bleu_sd"] == pytest.approx(math.sqrt(2)) and ra["seeds"] == 2
    assert rb["dev_bleu"] == 20.0 and math.isnan(rb["dev_bleu_sd"]) and (rb["seeds_finished"], rb["seeds"]) == (1, 2)
    assert rb["state"] == "1 finished, 1 diverged" and rb["rank"] == 1 and ra["rank"] == 2
    assert ra["cost_seconds"] == 20.0 and ra["cost_flops"] == 2e9 and ra["lr_scale"] == 0.5
    assert sample_label(a) != sample_label(b) and sample_label(dict(reversed(a.items()))) == sample_label(a)


def test_best_so_far_follows_the_order_samples_started_and_cumulative_compute():
    configs = pd.DataFrame({"sample": list("abcd"), "dev_ppl": [30.0, math.nan, 10.0, 20.0],
                            "cost_seconds": [1.0, 2.0, 3.0, 4.0], "cost_flops": [1.0, 1.0, 1.0, 1.0]})  # fmt: skip
    curve = best_so_far(configs, Objective("dev_ppl", "min"))
    assert list(curve["best"]) == [30.0, 30.0, 10.0, 10.0]
    assert list(curve["device_seconds"]) == [1.0, 3.0, 6.0, 10.0] and list(curve["samples"]) == [1, 2, 3, 4]


def test_pareto_front_keeps_the_configurations_no_other_dominates():
    configs = pd.DataFrame({"sample": list("abcd"), "dev_bleu": [10.0, 12.0, 8.0, 12.0],
                            "params": [5.0, 9.0, 6.0, 8.0]})  # fmt: skip
    front = pareto_front(configs, [BLEU, Objective("params", "min")])
    assert front == ["a", "d"]  # b is beaten by d (same BLEU, fewer parameters), c by a on both


def test_importance_names_both_evaluators_and_finds_the_parameter_that_matters():
    rng = np.random.default_rng(0)
    rows = [{"sample": f"s{i}", "lr_scale": float(rng.uniform(0.1, 1)), "warmup": int(rng.choice([5, 10]))}
            for i in range(24)]  # fmt: skip
    configs = pd.DataFrame(rows)
    configs["dev_bleu"] = 10 * configs["lr_scale"] + rng.normal(0, 0.05, len(configs))  # warmup does nothing
    configs.attrs["params"] = ["lr_scale", "warmup"]
    imp = importance(configs, BLEU, resamples=8).set_index(["evaluator", "param"])
    assert set(imp.index.get_level_values(0)) == {"fANOVA", "PED-ANOVA"}
    for ev in ("fANOVA", "PED-ANOVA"):
        assert imp.loc[(ev, "lr_scale"), "importance"] > imp.loc[(ev, "warmup"), "importance"]
        assert imp.loc[(ev, "lr_scale"), "resamples"] > 0
        assert imp.loc[(ev, "lr_scale"), "lo"] <= imp.loc[(ev, "lr_scale"), "median"] <= imp.loc[(ev, "lr_scale"), "hi"]


def _write_trial(sweep, tid, sampled, seed, bleu):
    wd = sweep / "trials" / tid
    wd.mkdir(parents=True)
    values = {"lr_scale": sampled["lr_scale"], "seed": seed}
    trial = {"id": tid, "group": "base", "row": "base", "seed": seed, "values": values, "config_hash": tid,
             "search": sampled}  # fmt: skip
    (wd / "trial.json").write_text(json.dumps(trial))
    (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": bleu, "wall_seconds": 1.0}))


def test_a_search_sweep_named_before_samples_had_labels_is_read_one_row_per_sample(tmp_path):
    """Trials of an older search were all named base-s1-*: collect takes each sample as its own row."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"name": "old", "profile": "smoke", "trials": [], "plan": {}}))
    _write_trial(sweep, "base-s1-aaaaaaaa", {"lr_scale": 0.5}, 1, 3.0)
    _write_trial(sweep, "base-s1-bbbbbbbb", {"lr_scale": 2.0}, 1, 5.0)
    df = collect(sweep)
    assert sorted(df["row"]) == sorted([sample_label({"lr_scale": 0.5}), sample_label({"lr_scale": 2.0})])
    assert set(df["group"]) == {"search"}
    assert len(configurations(df, [BLEU])) == 2


def _confirmed(winner_fresh, other_fresh):
    a, b = {"lr_scale": 0.5}, {"lr_scale": 2.0}
    rows = [_trial("a1", a, 1, 12.0, started=1), _trial("b1", b, 1, 10.0, started=2)]
    rows += [_trial(f"ca{i}", a, 100 + i, v, group="confirm") for i, v in enumerate(winner_fresh)]
    rows += [_trial(f"cb{i}", b, 100 + i, v, group="confirm") for i, v in enumerate(other_fresh)]
    df = pd.DataFrame(rows)
    return confirmation_table(df, configurations(df, [BLEU]), BLEU), sample_label(a), sample_label(b)


def test_confirmation_judges_the_search_winner_against_the_rest_with_fresh_seeds():
    table, a, b = _confirmed([11.0, 11.2, 10.9], [9.0, 9.1, 8.8])
    assert list(table["sample"]) == [a, b] and list(table["fresh_seeds"]) == [3, 3]
    first = table.iloc[0]
    assert first["search_score"] == 12.0 and first["confirmed"] == pytest.approx(11.0333, abs=1e-3)
    assert first["optimism"] == pytest.approx(12.0 - 11.0333, abs=1e-3) and first["ci"] > 0
    c = table.attrs["comparison"]
    assert (c.a, c.b, c.outcome.value) == (a, b, "agrees") and c.diff == pytest.approx(2.0666, abs=1e-3)
    assert "better than the best of the rest beyond seed noise" in " ".join(confirmation_lines(table, BLEU))
    table, a, b = _confirmed([10.0, 11.5, 9.0], [10.5, 9.5, 11.0])  # the search's margin was seed luck
    assert table.attrs["comparison"].outcome.value == "within noise"
    assert "within seed noise" in " ".join(confirmation_lines(table, BLEU))
    table, a, b = _confirmed([8.0, 8.1, 7.9], [11.0, 11.2, 10.9])
    assert table.attrs["comparison"].outcome.value == "contradicts"


def test_plots_draw_a_search_where_a_configuration_has_no_score_yet():
    from analysis.report import search_plots

    a, b, c = {"lr_scale": 0.5, "warmup": 5}, {"lr_scale": 2.0, "warmup": 10}, {"lr_scale": 1.0, "warmup": 5}
    df = pd.DataFrame([_trial("t1", a, 1, 10.0, started=1), _trial("t2", b, 1, math.nan, status="running", started=2),
                       _trial("t3", c, 1, 12.0, started=3)])  # fmt: skip
    configs = configurations(df, [BLEU])
    dists = {"lr_scale": optuna.distributions.FloatDistribution(0.1, 3.0, log=True)}
    for png in (search_plots.parallel_coordinates(configs, ["lr_scale", "warmup"], dists, BLEU),
                search_plots.slices(df, configs, ["lr_scale", "warmup"], dists, BLEU)):  # fmt: skip
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
