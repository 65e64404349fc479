"""Sweeps run once per test session and read by several modules: each `tsweep run` costs half a minute of two
cores (Ray, MLflow, a worker importing torch), so a test that needs a finished smoke sweep of its own works on a
copy (``tests.helpers.copy_sweep``) of the one sweep; tests that only read the original write their reports
elsewhere (`tsweep report --out`)."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import SEARCH_SMOKE, SMOKE, tsweep


def e2e_env(data_dir) -> dict:
    return dict(os.environ, TSWEEP_DATA_DIR=str(data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
                OMP_NUM_THREADS="1")  # fmt: skip


def _run(spec: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    r = tsweep("run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "2", env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.fixture(scope="session")
def smoke_sweep(fixture_corpus, fixture_data_dir, tmp_path_factory):
    """tests/specs/smoke.yaml (two rows x two seeds) run once: (sweep directory, its `tsweep run`, wall seconds).
    Read it; to change it, work on ``copy_sweep(path, tmp_path / ...)``."""
    out = tmp_path_factory.mktemp("smoke") / "sweep"
    start = time.time()
    r = _run(SMOKE, out, e2e_env(fixture_data_dir))
    return out, r, time.time() - start


@pytest.fixture(scope="session")
def smoke_search(fixture_corpus, fixture_data_dir, tmp_path_factory):
    """tests/specs/search-smoke.yaml (five Optuna samples) run once: (sweep directory, its `tsweep run`)."""
    out = tmp_path_factory.mktemp("search") / "sweep"
    return out, _run(SEARCH_SMOKE, out, e2e_env(fixture_data_dir))
