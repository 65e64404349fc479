"""The rounds around a search: seeds of a sample averaged for the searcher, the confirmation round's trials,
and the warm start of a new study from an earlier search (a real Optuna study on SQLite)."""

import json
import math

import optuna
import pytest

from analysis.data.samples import sample_label
from sweeps.run.confirm import confirm_trials, fresh_seeds
from sweeps.run.replicates import StepMeans, mean_final, mean_report
from sweeps.run.warm_start import ATTR, warm_start
from sweeps.spec.sweep_spec import parse_spec
from transformer_core.errors import UserError

SPACE = {"lr_scale": {"type": "loguniform", "low": 0.1, "high": 1.0}, "warmup": {"type": "choice", "values": [5, 10]}}


def _spec(**search):
    return parse_spec({"name": "s", "seeds": 2, "search": {"samples": 4, "space": SPACE, **search}})


def test_the_searcher_sees_the_mean_of_a_samples_seeds_at_steps_all_of_them_reached():
    means = StepMeans(2)
    means.add(0, {"step": 10, "dev_bleu": 4.0, "dev_ppl": 50.0})
    means.add(0, {"step": 20, "dev_bleu": 6.0, "dev_ppl": 40.0})
    assert means.ready() == []  # seed 2 has reached no step yet: no rung may compare seed 1 alone
    means.add(1, {"step": 10, "dev_bleu": 2.0, "dev_ppl": 70.0})
    (m,) = means.ready()
    assert (m["step"], m["dev_bleu"], m["dev_ppl"], m["seeds"]) == (10, 3.0, 60.0, 2)
    assert m["dev_bleu_seed_sd"] == pytest.approx(math.sqrt(2))
    means.add(1, {"step": 20, "dev_bleu": 8.0, "dev_ppl": 30.0})
    assert [r["step"] for r in means.ready()] == [20] and means.ready() == []  # each step once
    diverged = mean_report([{"step": 5, "dev_ppl": 40.0}, {"step": 5, "dev_ppl": float("inf")}])
    assert diverged["dev_ppl"] == float("inf")  # a diverged seed is not hidden from the searcher


def test_a_samples_final_metrics_are_the_mean_over_its_seeds_with_their_sd():
    f = mean_final([{"dev_bleu": 5.0, "dev_ppl": 40.0, "status": "finished", "step": 20, "done": True},
                    {"dev_bleu": 7.0, "dev_ppl": 30.0, "status": "finished", "step": 20, "done": True}])  # fmt: skip
    assert (f["dev_bleu"], f["dev_ppl"], f["status"], f["seeds"]) == (6.0, 35.0, "finished", 2)
    assert f["dev_bleu_seed_sd"] == pytest.approx(math.sqrt(2)) and f["seed_status"] == "finished,finished"
    g = mean_final([{"dev_bleu": 0.0, "status": "diverged"}, {"dev_bleu": 6.0, "status": "finished"}])
    assert (g["dev_bleu"], g["status"]) == (3.0, "finished")  # the diverged seed scores 0, as Tune reports it


def _sweep(root, scores, metric="dev_bleu", mode="max"):
    """A search sweep on disk: {lr_scale: [score per seed]}."""
    for i, (lr, seeds) in enumerate(scores.items()):
        sampled = {"lr_scale": lr, "warmup": 5}
        for seed, v in enumerate(seeds, 1):
            wd = root / "trials" / f"t{i}-s{seed}"
            wd.mkdir(parents=True)
            trial = {"id": wd.name, "group": "search", "row": sample_label(sampled), "seed": seed,
                     "values": {"lr_scale": lr}, "config_hash": wd.name, "search": sampled}  # fmt: skip
            (wd / "trial.json").write_text(json.dumps(trial))
            (wd / "result.json").write_text(json.dumps({"status": "finished", metric: v, "wall_seconds": 1.0}))
    state = {"name": "s", "profile": "smoke", "metric": metric, "mode": mode}
    (root / "sweep.json").write_text(json.dumps(state))
    return state


def test_confirmation_reruns_the_best_configurations_at_fresh_seeds(tmp_path):
    spec = _spec(confirm={"top": 2, "seeds": 3})
    state = _sweep(tmp_path, {0.2: [3.0, 3.2], 0.5: [6.0, 5.0], 0.9: [4.0, 4.4]})
    trials = confirm_trials(spec, "smoke", tmp_path, state)
    assert fresh_seeds(spec) == [3, 4, 5]  # after the search's seeds 1 and 2
    assert [(t.row, t.seed) for t in trials] == [(sample_label({"lr_scale": lr, "warmup": 5}), s)
                                                 for lr in (0.5, 0.9) for s in (3, 4, 5)]  # fmt: skip
    assert {t.group for t in trials} == {"confirm"} and trials[0].values["lr_scale"] == 0.5
    assert confirm_trials(_spec(), "smoke", tmp_path, state) == []  # no confirm: no round


def _earlier(root, values):
    """An earlier search sweep: sweep.json and a real study in optuna.db with these finished trials."""
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"name": "early", "metric": "dev_bleu", "mode": "max"}))
    study = optuna.create_study(study_name="early", storage=f"sqlite:///{root / 'optuna.db'}", direction="maximize")
    dists = {"lr_scale": optuna.distributions.FloatDistribution(0.01, 10, log=True),
             "warmup": optuna.distributions.CategoricalDistribution([5, 10, 20])}  # fmt: skip
    for (lr, warmup), v in values.items():
        study.add_trial(optuna.trial.create_trial(params={"lr_scale": lr, "warmup": warmup}, distributions=dists,
                                                  value=v))  # fmt: skip
    return root


def test_warm_start_seeds_the_new_study_once_with_the_earlier_points_of_this_space(tmp_path):
    source = _earlier(tmp_path / "early", {(0.5, 5): 4.0, (0.8, 10): 6.0, (5.0, 5): 1.0, (0.3, 20): 2.0})
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path / 'new.db'}", direction="maximize")
    assert warm_start(_spec(), study, source) == 2  # lr 5.0 and warmup 20 lie outside this spec's space
    trials = study.get_trials()
    assert sorted((t.params["lr_scale"], t.value) for t in trials) == [(0.5, 4.0), (0.8, 6.0)]
    assert all(t.user_attrs[ATTR] == str(source) for t in trials) and study.best_value == 6.0
    assert warm_start(_spec(), study, source) == 0 and len(study.get_trials()) == 2  # a resume adds nothing
    nxt = study.ask()
    assert nxt.number == 2  # the sampler's next trial comes after the earlier ones


def test_warm_start_refuses_what_is_not_an_earlier_search_with_the_same_objective(tmp_path):
    study = optuna.create_study()
    with pytest.raises(UserError, match="is not a search sweep directory"):
        warm_start(_spec(), study, tmp_path)
    source = _earlier(tmp_path / "early", {(0.5, 5): 4.0})
    ppl = parse_spec({"name": "s", "metric": "dev_ppl", "search": {"samples": 2, "space": SPACE}})
    with pytest.raises(UserError, match="a warm start needs the same objectives"):
        warm_start(ppl, study, source)
