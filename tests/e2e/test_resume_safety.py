"""--resume reads nothing pickled from the sweep location: a pickle planted in every file that resuming could
read (Tune's tuner.pkl, searcher state, experiment state, trial params, our checkpoints) is never executed,
and the trial whose result was lost is trained again."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, SEARCH_SMOKE, SMOKE, copy_sweep


class Planted:
    """Unpickling it creates ``marker``: proof that something loaded a pickle from the sweep location."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plant(out: Path, marker: Path) -> list[Path]:
    """The code-running pickle in place of every file Tune wrote, every checkpoint and every .pkl."""
    payload = pickle.dumps(Planted(marker))
    targets = {p for d in out.glob("tune*") for p in d.rglob("*") if p.is_file()}
    targets |= set(out.rglob("*.pkl")) | set(out.glob("trials/*/checkpoints/*"))
    for p in targets:
        p.write_bytes(payload)
    return sorted(targets)


def tsweep(*args, env):
    return subprocess.run([sys.executable, "-m", "sweeps.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)  # fmt: skip


@pytest.fixture
def env(fixture_corpus, fixture_data_dir):
    return dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
                OMP_NUM_THREADS="1")  # fmt: skip


def _resume_after_planting(tmp_path, env, sweep: Path, spec: Path, expect: int) -> tuple[Path, str]:
    """A copy of a finished session sweep with one trial's result lost and a pickle planted in every file Tune or a
    checkpoint left, resumed with the spec that ran it."""
    out, marker = copy_sweep(sweep, tmp_path / "sweep"), tmp_path / "MARKER"
    results = sorted(out.glob("trials/*/result.json"))
    assert len(results) == expect
    lost = results[0].parent.name
    results[0].unlink()  # a result lost: resume must train this trial again
    planted = plant(out, marker)
    assert any(p.name == "tuner.pkl" for p in planted) and any("/checkpoints/" in str(p) for p in planted)
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "2", "--resume", env=env)
    assert not marker.exists(), f"a pickle from the sweep location was loaded: {r.stderr[-3000:]}"
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(list(out.glob("trials/*/result.json"))) == expect
    assert json.loads((out / "trials" / lost / "result.json").read_text())["status"] == "finished"
    return out, lost


@pytest.mark.e2e
def test_a_grid_sweep_resumes_without_loading_a_planted_pickle(tmp_path, env, smoke_sweep):
    _resume_after_planting(tmp_path, env, smoke_sweep[0], SMOKE, expect=4)


@pytest.mark.e2e
@pytest.mark.slow  # the grid test above resumes the same way (a fresh Tuner, nothing unpickled)
def test_a_search_resumes_from_its_study_without_loading_a_planted_pickle(tmp_path, env, smoke_search):
    """Tuner.restore would unpickle tune/tuner.pkl and the searcher's state: the resumed search re-opens the
    Optuna study in optuna.db instead, trains the trial whose result was lost with the same knobs (its own
    workdir), and samples nothing new (every sample has a result)."""
    import optuna

    out, lost = _resume_after_planting(tmp_path, env, smoke_search[0], SEARCH_SMOKE, expect=5)
    assert len(list((out / "trials").iterdir())) == 5  # the lost trial ran again in its own workdir
    study = optuna.load_study(study_name="search-smoke", storage=f"sqlite:///{out / 'optuna.db'}")
    assert len(study.trials) == 6  # five samples, and the lost one enqueued again with its knobs
    knobs = json.loads((out / "trials" / lost / "trial.json").read_text())["search"]
    assert study.trials[-1].params == knobs
