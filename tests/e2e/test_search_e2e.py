"""Real smoke searches (Ray Tune, Optuna on SQLite, MLflow) on the fixture corpus: seeds the searcher sees, the
confirmation round, two objectives and their Pareto front, a warm start from an earlier search, and a search
killed mid-way and resumed."""

import json
import math
import os
import re
import subprocess
import sys

import optuna
import pytest
import yaml
from mlflow.tracking import MlflowClient

from analysis.data.samples import sample_label
from tests.helpers import ROOT

SPACE = {"lr_scale": {"type": "loguniform", "low": 0.3, "high": 3.0}, "warmup": {"type": "choice", "values": [5, 10]}}
pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # five real searches, about six minutes: opt in with -m slow


def _run(tmp, fixture_data_dir, doc, *extra):
    spec = tmp / f"{doc['name']}.yaml"
    base = {"corpus": {"name": "bible-en-de"}, "base": {"preset": "base"}, "train": {"steps": 20, "eval_every": 10},
            "metric": "dev_ppl", "mode": "min", "max_concurrent": 1}  # fmt: skip
    spec.write_text(yaml.safe_dump({**base, **doc}))
    out = tmp / doc["name"]
    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(spec), "--profile", "smoke", "--out", str(out)]
    cmd += ["--num-cpus", "2", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = subprocess.run([sys.executable, "-m", "sweeps.cli", "report", str(out)], capture_output=True, text=True,
                         env=env, timeout=600, cwd=ROOT)  # fmt: skip
    assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-3000:]
    return out, r.stdout


def _trials(out):
    return {t.name: (json.loads((t / "trial.json").read_text()), json.loads((t / "result.json").read_text())
                     if (t / "result.json").exists() else {}) for t in (out / "trials").iterdir()}  # fmt: skip


def _study(out, name):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'optuna.db'}")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, fixture_data_dir):
    doc = {"name": "seeded", "seeds": 2, "search": {"samples": 3, "seed": 0, "space": SPACE,
                                                    "confirm": {"top": 2, "seeds": 2}},
           "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2, "max_t": 4}}  # fmt: skip
    return _run(tmp_path_factory.mktemp("seeded"), fixture_data_dir, doc)


def _eval_at(workdir, step):
    evals = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"eval"' in x]
    return next(e["dev_ppl"] for e in evals if e["step"] == step)


def test_the_searcher_and_asha_see_the_mean_of_a_samples_seeds(seeded):
    out, _ = seeded
    trials = _trials(out)
    search = {tid: (t, r) for tid, (t, r) in trials.items() if t["group"] == "search"}
    summary = json.loads((out / "tune_summary.json").read_text())
    checked = 0
    for st in _study(out, "seeded").trials:
        sample = sample_label(st.params)
        seeds = {t["seed"]: (tid, r) for tid, (t, r) in search.items() if t["row"] == sample}
        assert sorted(seeds) == [1, 2]  # every sample ran both seeds: two trial directories of its own
        first = out / "trials" / seeds[1][0]
        if 1 in st.intermediate_values and all((out / "trials" / tid / "metrics.jsonl").exists() for tid, _ in
                                               seeds.values()):  # fmt: skip
            # ASHA's first rung (the report at step 10) compared the mean of both seeds at step 10
            means = [_eval_at(out / "trials" / tid, 10) for tid, _ in seeds.values()]
            assert st.intermediate_values[1] == pytest.approx(sum(means) / 2)
        finished = [r for _, r in seeds.values() if r.get("status") == "finished"]
        if len(finished) == 2 and not summary.get(seeds[1][0], {}).get("stopped_early"):
            assert st.values[0] == pytest.approx((finished[0]["dev_ppl"] + finished[1]["dev_ppl"]) / 2)
            checked += 1
        assert first.exists()
    assert checked >= 1  # the first sample always runs to the end: Optuna was told its seeds' mean
    logged = [json.loads(line) for p in (out / "tune").rglob("result.json") for line in p.read_text().splitlines()]
    assert any(math.isfinite(r.get("dev_ppl_seed_sd", math.nan)) for r in logged)  # the seed sd is logged


def test_the_best_configurations_are_confirmed_with_fresh_seeds_and_judged(seeded):
    out, log = seeded
    confirm = [(t, r) for t, r in _trials(out).values() if t["group"] == "confirm"]
    assert sorted(t["seed"] for t, _ in confirm) == [3, 3, 4, 4] and len({t["row"] for t, _ in confirm}) == 2
    assert all(r.get("status") == "finished" for _, r in confirm)  # no scheduler stops a confirmation
    md = (out / "report" / "report.md").read_text()
    section = md.split("## Confirmation with fresh seeds")[1].split("\n## ")[0]
    assert "Verdict:" in section and "2/2" in section and "optimism" in section
    # the study and the MLflow parent run say what the report says; the parent counts all 3 x 2 + 2 x 2 trials
    attrs = _study(out, "seeded").user_attrs
    assert attrs["confirmation.seeds"] == [3, 4] and f"Verdict: {attrs['confirmation.verdict']}." in section
    state = json.loads((out / "sweep.json").read_text())
    parent = MlflowClient(f"sqlite:///{out / 'mlflow.db'}").get_run(state["parent_run_id"])
    assert parent.data.tags["search.verdict"] == attrs["confirmation.verdict"]
    assert parent.data.tags["search.winner"] == attrs["confirmation.sample"]
    assert parent.data.metrics["trials_planned"] == 10
    # the log counts the search and its confirmation as one plan, from the sweep's start
    counts = [int(k) for k, n in re.findall(r"\[(\d+) of (\d+) trials ended", log) if n == "10"]
    assert counts and counts == sorted(counts) and len(counts) == len(re.findall(r"trials ended", log)), log
    assert re.search(r"confirming the 2 best configurations .*: 4 trials: sample-[0-9a-f]{8} \(lr_scale=", log), log


@pytest.fixture(scope="module")
def pareto(tmp_path_factory, fixture_data_dir):
    space = {"d_model": {"type": "choice", "values": [256, 512, 1024]}, "lr_scale": SPACE["lr_scale"]}
    objectives = {"dev_ppl": "min", "params": "min"}
    search = {"samples": 4, "seed": 1, "space": space, "objectives": objectives}
    doc = {"name": "pareto", "seeds": [1], "search": search}
    return _run(tmp_path_factory.mktemp("pareto"), fixture_data_dir, doc)


def test_two_objectives_give_a_multi_objective_study_and_a_pareto_front(pareto):
    out, _ = pareto
    study = _study(out, "pareto")
    assert len(study.directions) == 2
    results = {sample_label(t["search"]): r for t, r in _trials(out).values()}
    for st in study.trials:
        r = results[sample_label(st.params)]
        assert st.values == pytest.approx([r["dev_ppl"], r["params"]])
    assert json.loads((out / "sweep.json").read_text())["objectives"][1] == {"metric": "params", "mode": "min"}
    md = (out / "report" / "report.md").read_text()
    front = md.split("## Pareto front")[1].split("\n\n")[1]
    assert (out / "report" / "pareto.png").exists() and "](pareto.png)" in md
    best_ppl = min(results, key=lambda s: results[s]["dev_ppl"])
    smallest = min(results, key=lambda s: (results[s]["params"], results[s]["dev_ppl"]))
    assert best_ppl in front and smallest in front  # each objective's best is on the front


def test_warm_start_seeds_the_study_with_an_earlier_search_and_a_resume_adds_nothing(seeded, tmp_path,
                                                                                     fixture_data_dir):  # fmt: skip
    source, _ = seeded
    earlier = [t for t in _study(source, "seeded").trials if t.state == optuna.trial.TrialState.COMPLETE]
    doc = {"name": "warm", "seeds": [1], "search": {"samples": 2, "seed": 5, "space": SPACE, "warm_start": str(source)}}
    out, stdout = _run(tmp_path, fixture_data_dir, doc)
    assert f"warm start: {len(earlier)} finished trials" in stdout
    study = _study(out, "warm")
    warm = [t for t in study.trials if t.user_attrs.get("warm_start")]
    assert sorted(t.values[0] for t in warm) == sorted(t.values[0] for t in earlier)
    assert len(study.trials) == len(earlier) + 2 and len(list((out / "trials").iterdir())) == 2  # none re-run
    _run(tmp_path, fixture_data_dir, doc, "--resume")
    assert len(_study(out, "warm").trials) == len(earlier) + 2 and len(list((out / "trials").iterdir())) == 2


def test_a_search_killed_mid_way_resumes_without_losing_or_repeating_a_configuration(tmp_path, fixture_data_dir):
    """SIGINT once the first sample has a result: the driver ends the sweep as interrupted; --resume re-opens the
    study and finishes the search with every sampled configuration exactly once (the finished ones not retrained,
    the interrupted one continued in its own directory)."""
    import signal
    import time

    doc = {"name": "killed", "seeds": [1], "search": {"samples": 4, "seed": 3, "space": SPACE}}
    spec = tmp_path / "killed.yaml"
    spec.write_text(yaml.safe_dump({"corpus": {"name": "bible-en-de"}, "train": {"steps": 40, "eval_every": 10},
                                    "metric": "dev_ppl", "max_concurrent": 1, **doc}))  # fmt: skip
    out = tmp_path / "killed"
    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "sweeps.cli", "run", str(spec), "--profile", "smoke", "--out", str(out),
           "--num-cpus", "2"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    deadline = time.time() + 600
    while not list(out.glob("trials/*/result.json")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout = proc.communicate(timeout=600)[0]
    assert proc.returncode == 130, stdout[-3000:]
    before = {p.parent.name: p.read_text() for p in out.glob("trials/*/result.json")}
    assert 1 <= len(before) < 4
    r = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trials = _trials(out)
    assert len(trials) == 4 and len({sample_label(t["search"]) for t, _ in trials.values()}) == 4
    assert all(res.get("status") == "finished" for _, res in trials.values())
    for tid, text in before.items():  # finished before the signal: not trained again
        assert (out / "trials" / tid / "result.json").read_text() == text
        assert len((out / "trials" / tid / "attempts.jsonl").read_text().splitlines()) == 1
    done = [t for t in _study(out, "killed").trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(sample_label(t.params) for t in done) == sorted(sample_label(t["search"]) for t, _ in trials.values())
