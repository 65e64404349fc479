"""A search's own state under hostile edits (issue 43): a resumed confirmation round, a damaged or foreign
optuna.db, a search space edited between runs, a warm start from something that is not an earlier search; each
one line before Ray starts, and nothing written into another sweep.  Real Optuna studies on SQLite, no Ray."""

import hashlib
import json
import sqlite3

import optuna
import pytest

from analysis.data.samples import sample_label
from analysis.data.study_file import MAX_ENV
from sweeps.run.confirm import best_samples
from sweeps.run.warm_start import ATTR, check_source, warm_start
from sweeps.spec.sweep_spec import parse_spec
from sweeps.state.search_state import check_study, plan_search, space_distributions
from tests.helpers import one_line, tsweep
from transformer_core.errors import UserError

SPACE = {"lr_scale": {"type": "loguniform", "low": 0.1, "high": 1.0}, "warmup": {"type": "choice", "values": [5, 10]}}


def _spec(space=SPACE, name="s", **search):
    return parse_spec({"name": name, "seeds": [1], "search": {"samples": 3, "space": space, **search}})


def _study(root, spec, points, name=None, waiting=()):
    """The sweep's optuna.db with finished trials at ``points`` [(lr_scale, warmup)] sampled from ``spec``'s space,
    and ``waiting`` points enqueued (a resume's)."""
    root.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(study_name=name or spec.name, storage=f"sqlite:///{root / 'optuna.db'}")
    dists = space_distributions(spec)
    for i, (lr, warmup) in enumerate(points):
        study.add_trial(optuna.trial.create_trial(params={"lr_scale": lr, "warmup": warmup}, distributions=dists,
                                                  value=float(i)))  # fmt: skip
    for lr, warmup in waiting:
        study.enqueue_trial({"lr_scale": lr, "warmup": warmup})
    return root / "optuna.db"


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_space_as_optuna_search_converts_it_without_ray():
    from ray.tune.search.optuna import OptunaSearch

    from sweeps.run.tune_adapter import param_space

    space = {**SPACE, "d_model": {"type": "int", "low": 256, "high": 512}, "P_drop": {"type": "uniform", "low": 0,
                                                                                    "high": 0.3}}  # fmt: skip
    spec = _spec(space)
    assert space_distributions(spec) == OptunaSearch.convert_search_space(param_space(spec, []))


def test_a_resumed_confirmation_picks_the_best_search_samples_whatever_the_plan_lists_first(tmp_path):
    """Confirm trials (no sampled values) come first in sweep.json: best_samples read them as samples (TypeError)."""
    spec = _spec(confirm={"top": 1, "seeds": 1})
    good, bad = {"lr_scale": 0.5, "warmup": 5}, {"lr_scale": 0.2, "warmup": 10}
    trials = {"c": ("confirm", sample_label(good), 2, None, 5.0), "a": ("search", sample_label(good), 1, good, 6.0),
              "b": ("search", sample_label(bad), 1, bad, 3.0)}  # fmt: skip
    plan = {}
    for tid, (group, row, seed, sampled, bleu) in trials.items():
        wd = tmp_path / "trials" / tid
        wd.mkdir(parents=True)
        record = {"id": tid, "group": group, "row": row, "seed": seed, "values": {}, "config_hash": tid * 8}
        (wd / "trial.json").write_text(json.dumps({**record, **({"search": sampled} if sampled else {})}))
        (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": bleu}))
        if group == "confirm":
            plan[tid] = record
    state = {"name": "s", "profile": "smoke", "metric": "dev_bleu", "mode": "max", "trials": list(plan), "plan": plan}
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    assert best_samples(spec, tmp_path, state) == [good]


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda db: db.write_bytes(b"\x8f garbage " * 500), "not an SQLite database"),
        (lambda db: db.write_bytes(db.read_bytes()[: db.stat().st_size // 2]), "not a readable database"),
        (lambda db: _foreign(db), "without Optuna's tables"),
    ],
    ids=["garbage", "cut-in-half", "mlflow-db"],
)
def test_a_damaged_or_foreign_optuna_db_is_one_line_and_left_as_it_was(tmp_path, damage, said):
    spec = _spec()
    db = _study(tmp_path / "sweep", spec, [(0.5, 5), (0.2, 10)])
    damage(db)
    before = _digest(db)
    with pytest.raises(UserError, match=said) as err:
        check_study(spec, tmp_path / "sweep")
    assert "optuna.db" in str(err.value) and "move it away" in str(err.value)
    with pytest.raises(UserError, match=said):  # a driver's round checks it too, before Tune opens it
        plan_search(spec, "smoke", tmp_path / "sweep", lambda *a: None, {})
    assert _digest(db) == before


def _foreign(db):
    """Another tool's SQLite database (an mlflow.db copied in as optuna.db)."""
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE experiments (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, experiment_id INTEGER)")
    con.commit()
    con.close()


def test_another_sweeps_study_and_an_empty_or_missing_file(tmp_path):
    spec = _spec()
    _study(tmp_path / "other", spec, [(0.5, 5)], name="someone-else")
    with pytest.raises(UserError, match="holds the study 'someone-else', not 's'"):
        check_study(spec, tmp_path / "other")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "optuna.db").write_bytes(b"")  # Optuna creates its tables in it: a resume goes on
    assert check_study(spec, tmp_path / "empty") is False
    assert check_study(spec, tmp_path / "none") is False


def test_a_search_space_edited_between_runs_is_refused_with_what_changed(tmp_path):
    """warmup [5, 10] -> [5, 20]: the unfinished warmup=10 sample was queued again and failed inside Tune."""
    _study(tmp_path, _spec(), [(0.5, 5), (0.2, 10)], waiting=[(0.3, 10)])
    edited = _spec({**SPACE, "warmup": {"type": "choice", "values": [5, 20]}})
    with pytest.raises(UserError, match=r"warmup: choice \[5, 10\] -> choice \[5, 20\]"):
        check_study(edited, tmp_path)
    with pytest.raises(UserError, match="search.space has changed"):
        plan_search(edited, "smoke", tmp_path, lambda *a: None, {})
    wider = _spec({**SPACE, "lr_scale": {"type": "loguniform", "low": 0.1, "high": 2.0}})
    with pytest.raises(UserError, match=r"lr_scale: loguniform \[0.1, 1\] -> loguniform \[0.1, 2\]"):
        check_study(wider, tmp_path)
    assert check_study(_spec(), tmp_path) is False  # the space it was run with: resumed


def test_a_point_enqueued_outside_the_space_is_refused(tmp_path):
    _study(tmp_path, _spec(), [], waiting=[(0.3, 20)])  # only enqueued points: no distributions recorded yet
    with pytest.raises(UserError, match="warmup=20"):
        check_study(_spec(), tmp_path)


def _earlier(root, name="early"):
    """An earlier search sweep: sweep.json and its study with two finished trials."""
    spec = _spec(name=name)
    _study(root, spec, [(0.5, 5), (0.8, 10)])
    (root / "sweep.json").write_text(json.dumps({"name": name, "metric": "dev_bleu", "mode": "max", "plan": {}}))
    return root


def test_a_warm_start_reads_the_earlier_study_without_writing_to_it(tmp_path):
    source = _earlier(tmp_path / "early")
    before = _digest(source / "optuna.db")
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path / 'new.db'}")
    assert warm_start(_spec(), study, source) == 2
    assert all(t.user_attrs[ATTR] == str(source) for t in study.get_trials())
    assert _digest(source / "optuna.db") == before


def test_a_warm_start_from_another_tools_database_writes_nothing_into_it(tmp_path):
    """An mlflow.db copied in as the earlier optuna.db: Optuna created its schema in it (65 -> 77 tables)."""
    source = _earlier(tmp_path / "early")
    _foreign(source / "optuna.db")
    before = _digest(source / "optuna.db")
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path / 'new.db'}")
    with pytest.raises(UserError, match="search.warm_start: .* without Optuna's tables"):
        warm_start(_spec(), study, source)
    assert _digest(source / "optuna.db") == before


def test_a_huge_sparse_study_file_is_refused_by_its_size(tmp_path, monkeypatch):
    source = _earlier(tmp_path / "early")
    with open(source / "optuna.db", "r+b") as f:
        f.truncate(1 << 30)  # sparse: costs no disk, but a reader that copied it whole would take 1 GiB
    with pytest.raises(UserError, match="1,073,741,824 bytes, more than the"):
        check_source(_spec(warm_start=str(source)))
    (source / "optuna.db").write_bytes(b"")
    monkeypatch.setenv(MAX_ENV, "4096")
    _earlier(tmp_path / "early")
    with pytest.raises(UserError, match=f"set {MAX_ENV}=N to allow more"):
        check_source(_spec(warm_start=str(source)))


@pytest.mark.parametrize("what", ["missing", "ablation", "loop", "damaged"])
def test_a_bad_warm_start_is_one_line_before_ray_and_leaves_out_unmade(tmp_path, what):
    """`tsweep run` refused these only once Ray had started and sweep.json was written: a rerun then said
    "already holds sweep"."""
    source = tmp_path / "source"
    if what == "ablation":
        source.mkdir()
        (source / "sweep.json").write_text(json.dumps({"name": "x", "plan": {}}))
    elif what == "loop":
        source.symlink_to(source)
    elif what == "damaged":
        _earlier(source)
        (source / "optuna.db").write_bytes(b"\0" * 4096)
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "s", "search": {"samples": 2, "space": SPACE, "warm_start": str(source)}}))
    out = tmp_path / "out"
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "1")
    assert "search.warm_start" in one_line(r)
    assert not out.exists()


def test_a_resume_with_a_damaged_study_or_an_edited_space_is_refused_before_ray(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "s", "search": {"samples": 3, "space": SPACE}}))
    out = tmp_path / "out"
    _study(out, _spec(), [(0.5, 5), (0.2, 10)])
    (out / "sweep.json").write_text(json.dumps({"name": "s", "profile": "smoke", "status": "interrupted",
                                                "plan": {}, "trials": []}))  # fmt: skip
    state = (out / "sweep.json").read_text()
    edited = dict(SPACE, warmup={"type": "choice", "values": [5, 20]})
    spec.write_text(json.dumps({"name": "s", "search": {"samples": 3, "space": edited}}))
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--resume", "--num-cpus", "1")
    assert "warmup: choice [5, 10] -> choice [5, 20]" in one_line(r)
    (out / "optuna.db").write_bytes(b"garbage" * 100)
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--resume", "--num-cpus", "1")
    assert "not an SQLite database" in one_line(r)
    assert (out / "sweep.json").read_text() == state and not (out / "driver.log").exists()  # Ray never started


def test_a_planted_trial_does_not_choose_what_the_confirmation_trains(tmp_path):
    """A trial directory of its own name with sampled knobs outside the space (or other knobs): never confirmed."""
    spec = _spec(confirm={"top": 2, "seeds": 1})
    good = {"lr_scale": 0.5, "warmup": 5}
    planted = [{"lr_scale": 50.0, "warmup": 5}, {"lr_scale": 0.5, "warmup": 5, "d_model": 10**6}, {"lr_scale": 0.5}]
    for i, sampled in enumerate([good, *planted]):
        tid = f"t{i}-s1-aaaaaaaa"
        wd = tmp_path / "trials" / tid
        wd.mkdir(parents=True)
        record = {"id": tid, "group": "search", "row": sample_label(sampled), "seed": 1, "values": {},
                  "config_hash": "aaaaaaaa0000", "search": sampled}  # fmt: skip
        (wd / "trial.json").write_text(json.dumps(record))
        (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 1.0 + 10 * i}))
    state = {"name": "s", "profile": "smoke", "metric": "dev_bleu", "mode": "max", "trials": [], "plan": {}}
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    assert best_samples(spec, tmp_path, state) == [good]


def test_a_resumed_confirmation_round_plans_the_same_trials_again(tmp_path):
    """The round as `tsweep run --resume` drives it (runner.run_trials stubbed): the confirmation of the best sample
    at the fresh seed, the same trial whether or not its result.json is there."""
    from dataclasses import make_dataclass

    from sweeps.run.confirm import run_confirmation

    spec = _spec(confirm={"top": 1, "seeds": 1})
    good = {"lr_scale": 0.5, "warmup": 5}
    wd = tmp_path / "trials" / "c"
    for tid, sampled, bleu in (("a-s1-aaaaaaaa", good, 6.0), ("b-s1-bbbbbbbb", {"lr_scale": 0.2, "warmup": 10}, 3.0)):
        wd = tmp_path / "trials" / tid
        wd.mkdir(parents=True)
        (wd / "trial.json").write_text(json.dumps({"id": tid, "group": "search", "row": sample_label(sampled),
                                                   "seed": 1, "values": {}, "config_hash": tid[-8:] + "0000",
                                                   "search": sampled}))  # fmt: skip
        (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": bleu}))
    state = {"name": "s", "profile": "smoke", "metric": "dev_bleu", "mode": "max", "trials": [], "plan": {}}
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    ctx = make_dataclass("Ctx", ["spec", "profile_name", "sweep_dir", "state"])(spec, "smoke", tmp_path, state)
    rounds = []
    run = lambda grid, trials, round_name, echo: rounds.append(trials) or {}  # noqa: E731
    run_confirmation(ctx, run, echo=lambda line: None)
    (first,) = rounds[0]
    assert (first.group, first.row, first.seed) == ("confirm", sample_label(good), 2)
    plan = {first.trial_id: first.record().plan_entry()}  # the runner lists the round's trials in sweep.json
    state.update(trials=list(plan), plan=plan)
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    (tmp_path / "trials" / first.trial_id).mkdir()
    (tmp_path / "trials" / first.trial_id / "trial.json").write_text(json.dumps(first.record().to_json()))
    run_confirmation(ctx, run, echo=lambda line: None)  # resumed: its result.json is missing
    (tmp_path / "trials" / first.trial_id / "result.json").write_text(json.dumps({"status": "finished",
                                                                                 "dev_bleu": 5.0}))  # fmt: skip
    run_confirmation(ctx, run, echo=lambda line: None)  # resumed once it finished
    assert [[t.trial_id for t in r] for r in rounds] == [[first.trial_id]] * 3
