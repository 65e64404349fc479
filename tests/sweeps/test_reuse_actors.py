"""A slot's worker process runs trial after trial (Tune's reuse_actors): what a trial computes must not
depend on what its process ran before.  tests/e2e/test_sweeps_e2e.py checks that a sweep does reuse them."""

import json
from dataclasses import replace

import pytest

from sweeps.spec import load_spec, plan
from sweeps.trial import run_trial
from sweeps.tune_adapter import reuse_actors
from tests.helpers import SMOKE
from transformer_core.errors import UserError


def _learning(result: dict, workdir) -> dict:
    losses = [json.loads(x)["loss"] for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    keys = ("dev_bleu", "dev_ppl", "test_bleu", "test_ppl", "target_tokens", "params")
    return {**{k: result[k] for k in keys}, "losses": losses}


def test_a_trial_after_other_trials_in_its_process_computes_what_it_computes_first(fixture_data_dir, tmp_path):
    trials = {(t.row, t.seed): t for t in plan(load_spec(SMOKE), "smoke")}
    base = trials[("base", 1)]  # with dropout: its masks come from the generator the trial seeds

    def run(trial, where):
        result = run_trial(trial.record(tmp_path / where))
        return _learning(result, tmp_path / where / "trials" / trial.trial_id)

    first = run(base, "first")
    run(trials[("D1", 2)], "between")  # another seed and dropout in the same process
    again = run(base, "again")
    assert first["losses"] and first == again


def test_reuse_is_on_for_eager_trials_in_the_workers_own_thread_unless_switched_off(monkeypatch):
    spec = load_spec(SMOKE)
    payloads = [t.record() for t in plan(spec, "smoke")]
    monkeypatch.delenv("TSWEEP_REUSE_ACTORS", raising=False)
    assert reuse_actors(spec, payloads) is True
    # children a kept worker would leave running: data-parallel workers, a search's seed tasks
    assert reuse_actors(replace(spec, resources={**spec.resources, "workers": 2}), payloads) is False
    search = replace(spec, search={"space": {"P_drop": {"type": "uniform", "low": 0.0, "high": 0.3}}})
    assert reuse_actors(search, payloads) is False and reuse_actors(replace(search, seeds=[1]), payloads) is True
    compiled = [replace(p, values={**p.values, "compile": "on"}) for p in payloads]
    assert reuse_actors(spec, compiled) is False  # torch's compiled code would carry over
    monkeypatch.setenv("TSWEEP_REUSE_ACTORS", "0")
    assert reuse_actors(spec, payloads) is False
    monkeypatch.setenv("TSWEEP_REUSE_ACTORS", "yes")
    with pytest.raises(UserError, match="TSWEEP_REUSE_ACTORS='yes' is invalid: allowed 1"):
        reuse_actors(spec, payloads)
