"""A search reads the same in every tool (issue 53, item 5): the confirmation and the report's importances in the
Optuna study's user attributes, the winner and its verdict as the MLflow parent run's tags, the parent's trial counts
over search and confirmation, and the importance optuna-dashboard shows reproduced and named in the report.  A small
search sweep on disk (real trial records of a real spec, results written by hand) with a real Optuna study
(SQLite) and a real MLflow store (SQLite); no Ray, no training."""

import json
import math

import optuna
import pytest
import yaml
from mlflow.tracking import MlflowClient

from analysis.report.search_report import build_search, search_markdown
from analysis.stats.search_verdicts import STUDY_ATTR, confirmation_lines, verdict_words
from sweeps.run.runner import SweepContext, _parent_metrics
from sweeps.run.search_record import record_search
from sweeps.run.tracking import default_uri, ensure_parent_run
from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import load_spec, sample_trials
from sweeps.state.search_state import open_study, planned_total, space_distributions

SAMPLES = [{"lr_scale": 0.5, "warmup": 5}, {"lr_scale": 0.8, "warmup": 10}, {"lr_scale": 1.2, "warmup": 5},
           {"lr_scale": 2.0, "warmup": 10}]  # fmt: skip
SEARCH_PPL = [40.0, 50.0, 60.0, 70.0]  # the first sample is the search's best (dev_ppl minimised)
CONFIRM_PPL = {0: [44.0, 46.0], 1: [45.0, 47.0]}  # fresh seeds 2 and 3: the winner no better than the runner-up


def _spec(tmp_path):
    doc = {"name": "recorded", "corpus": {"name": "bible-en-de"}, "base": {"preset": "base"}, "seeds": [1],
           "search": {"samples": 4, "seed": 0, "confirm": {"top": 2, "seeds": 2},
                      "space": {"lr_scale": {"type": "loguniform", "low": 0.3, "high": 3.0},
                                "warmup": {"type": "choice", "values": [5, 10]}}},
           "train": {"steps": 20, "eval_every": 10}, "metric": "dev_ppl", "mode": "min"}  # fmt: skip
    path = tmp_path / "recorded.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_spec(path)


def _trial(root, trial, ppl, search=None):
    wd = root / "trials" / trial.trial_id
    wd.mkdir(parents=True)
    (wd / "trial.json").write_text(json.dumps(trial.record(str(root), search=search).to_json()))
    result = {"status": "finished", "config_hash": trial.config_hash, "dev_bleu": 1.0, "dev_ppl": ppl,
              "test_bleu": 1.0, "test_ppl": ppl, "steps": 20, "step": 20, "wall_seconds": 2.0, "train_flops": 1e9,
              "params": 1000}  # fmt: skip
    (wd / "result.json").write_text(json.dumps(result))
    (wd / "metrics.jsonl").write_text(json.dumps({"kind": "eval", "step": 20, "dev_ppl": ppl}) + "\n")


@pytest.fixture
def sweep(tmp_path):
    """(spec, sweep directory, sweep.json's state, tracking): four samples searched at seed 1, the best two confirmed
    at seeds 2 and 3 (in sweep.json's plan, as the confirmation round writes them), a study and a parent run."""
    spec, root = _spec(tmp_path), tmp_path / "sweep"
    profile = get_profile("smoke")
    root.mkdir()
    study = open_study(spec, root)
    dists = space_distributions(spec)
    plan, trials = {}, []
    for i, (sampled, ppl) in enumerate(zip(SAMPLES, SEARCH_PPL)):
        (first,) = sample_trials(spec, profile, sampled)
        _trial(root, first, ppl, search=sampled)
        study.add_trial(optuna.trial.create_trial(params=sampled, distributions=dists, value=ppl))
        for t, p in zip(sample_trials(spec, profile, sampled, [2, 3], "confirm"), CONFIRM_PPL.get(i, [])):
            _trial(root, t, p)
            plan[t.trial_id] = t.record().plan_entry()
            trials.append(t.trial_id)
    uri = default_uri(root)
    exp, parent = ensure_parent_run(uri, "recorded", "recorded", {}, None, artifact_location=str(root / "mlartifacts"))
    tracking = {"uri": uri, "experiment_id": exp, "parent_run_id": parent}
    state = {"name": "recorded", "spec": "recorded.yaml", "profile": "smoke", "status": "finished",
             "profile_rules": profile.rules(), "metric": "dev_ppl", "mode": "min", "objectives": None,
             "trials": trials, "plan": plan, "uri": uri, "parent_run_id": parent}  # fmt: skip
    (root / "sweep.json").write_text(json.dumps(state))
    return spec, root, state, tracking


def test_the_confirmation_and_the_winner_are_in_the_study_and_the_parent_run_as_the_report_says(sweep):
    spec, root, state, tracking = sweep
    outcome = record_search(root, state, tracking, echo=lambda s: None)
    attrs = optuna.load_study(study_name="recorded", storage=f"sqlite:///{root / 'optuna.db'}").user_attrs
    model = build_search(root, resamples=2)
    table = model.confirm
    winner = table.iloc[0]["sample"]
    assert attrs[f"{STUDY_ATTR}.sample"] == winner == model.configs.sort_values("rank").iloc[0]["sample"]
    assert attrs[f"{STUDY_ATTR}.values"] == SAMPLES[0]
    assert attrs[f"{STUDY_ATTR}.search_score"] == 40.0  # the study's best value: optuna-dashboard's Best Trial
    assert attrs[f"{STUDY_ATTR}.confirmed_value"] == pytest.approx(math.sqrt(44.0 * 46.0))  # geometric mean
    lo, hi = attrs[f"{STUDY_ATTR}.confirmed_interval"]
    assert lo < math.sqrt(44.0 * 46.0) < hi and attrs[f"{STUDY_ATTR}.seeds"] == [2, 3]
    assert attrs[f"{STUDY_ATTR}.verdict"] == verdict_words(table) and "not separable" in attrs[f"{STUDY_ATTR}.verdict"]
    md = "\n".join(search_markdown(model))
    assert f"Verdict: {attrs[f'{STUDY_ATTR}.verdict']}." in md
    # the confirmed value differs from the optimistic search score: the study and the report say so, in one sentence
    note = attrs[f"{STUDY_ATTR}.note"]
    assert "44.989" in note and "40.000" in note and "Best Trial" in note
    assert note in confirmation_lines(table, model.objective)
    assert note in md and f"{STUDY_ATTR}.*" in md
    tags = MlflowClient(tracking["uri"]).get_run(tracking["parent_run_id"]).data.tags
    assert tags["search.winner"] == winner and tags["search.winner_values"] == "lr_scale=0.5, warmup=5"
    assert tags["search.verdict"] == attrs[f"{STUDY_ATTR}.verdict"]
    assert float(tags["search.confirmed_value"]) == pytest.approx(math.sqrt(44.0 * 46.0))
    assert outcome[f"{STUDY_ATTR}.sample"] == winner


def test_the_reports_importances_are_in_the_study_with_their_method(sweep):
    spec, root, state, tracking = sweep
    record_search(root, state, tracking, echo=lambda s: None)
    attrs = optuna.load_study(study_name="recorded", storage=f"sqlite:///{root / 'optuna.db'}").user_attrs
    imp = build_search(root, resamples=2).importance
    for name in ("fANOVA", "PED-ANOVA"):
        ours = imp[imp["evaluator"] == name]
        stored = attrs[f"importance.{name}"]
        assert stored["values"] == pytest.approx(dict(zip(ours["param"], ours["importance"])))
        assert stored["method"] == ours["method"].iloc[0]
    assert attrs["importance.fANOVA"]["method"].startswith("optuna.importance.FanovaImportanceEvaluator(seed=0)")
    assert "PedAnovaImportanceEvaluator(target_quantile=0.5)" in attrs["importance.PED-ANOVA"]["method"]


def test_the_report_shows_the_importance_optuna_dashboard_shows_and_names_its_method(sweep):
    from optuna_dashboard._importance import get_param_importance_from_trials_cache
    from optuna_dashboard._inmemory_cache import InMemoryCache

    spec, root, state, tracking = sweep
    storage = optuna.storages.RDBStorage(f"sqlite:///{root / 'optuna.db'}")
    study_id = storage.get_study_id_from_name("recorded")
    shown = get_param_importance_from_trials_cache(InMemoryCache(), storage, study_id, 0,
                                                   storage.get_all_trials(study_id))  # fmt: skip
    imp = build_search(root, resamples=2).importance
    dash = imp[imp["evaluator"] == "optuna-dashboard"]
    assert dict(zip(dash["param"], dash["importance"])) == pytest.approx({x["name"]: x["importance"] for x in shown})
    assert (dash["method"].str.contains("PedAnovaImportanceEvaluator\\(\\) at its defaults")).all()
    md = "\n".join(search_markdown(build_search(root, resamples=2)))
    assert "FanovaImportanceEvaluator(seed=0)" in md and "as optuna-dashboard computes" in md


def test_the_parent_run_counts_every_trial_of_the_search_and_its_confirmation(sweep):
    spec, root, state, tracking = sweep
    assert planned_total(spec) == 4 * 1 + 2 * 2
    ctx = SweepContext(spec, "smoke", str(root), root, None, None, state, tracking)  # type: ignore[arg-type]
    assert ctx.finished_count() == (8, 8)
    _parent_metrics(ctx)
    metrics = MlflowClient(tracking["uri"]).get_run(tracking["parent_run_id"]).data.metrics
    assert (metrics["trials_planned"], metrics["trials_finished"]) == (8, 8)


def test_the_confirmation_round_names_each_configuration_with_its_knobs(sweep):
    from sweeps.run.confirm import run_confirmation

    spec, root, state, tracking = sweep
    ctx = SweepContext(spec, "smoke", str(root), root, None, None, state, tracking)  # type: ignore[arg-type]
    ran, said = [], []
    run_confirmation(ctx, lambda grid, trials, **kw: ran.extend(trials) or {}, said.append)
    assert len(ran) == 4 and said == [
        f"confirming the 2 best configurations with fresh seeds [2, 3]: 4 trials: {ran[0].row} (lr_scale=0.5, "
        f"warmup=5); {ran[2].row} (lr_scale=0.8, warmup=10)"
    ]


def test_load_sweeps_verdicts_of_a_search_carry_the_confirmations_verdict(sweep):
    """A search's ``verdicts`` frame has a verdict column (issue 53): the winner's line says the report's verdict,
    the runner-up's what it was to the winner."""
    from sweeps import load_sweep

    spec, root, state, tracking = sweep
    verdicts = load_sweep(root).verdicts
    winner, other = verdicts["sample"]
    assert list(verdicts["verdict"]) == [verdict_words(build_search(root, resamples=2).confirm),
                                         f"one of the rest {winner} was judged against"]  # fmt: skip
    assert verdicts["verdict"].iloc[0].startswith(f"{winner} is not separable")
