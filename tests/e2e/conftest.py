"""Sweeps run once per test session and read by several modules: each `tsweep run` costs half a minute of two
cores (Ray, MLflow, a worker importing torch), so a test that needs a finished smoke sweep of its own works on a
copy (``tests.helpers.copy_sweep``) of the one sweep; tests that only read the original write their reports
elsewhere (`tsweep report --out`)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, SEARCH_SMOKE, SMOKE, tsweep


def e2e_env(data_dir) -> dict:
    return dict(os.environ, TSWEEP_DATA_DIR=str(data_dir), RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
                OMP_NUM_THREADS="1")  # fmt: skip


# `tsweep ARGS` that, on its way out, writes the torch modules its process loaded to $TSWEEP_TEST_MODULES
DRIVER_PROBE = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["TSWEEP_TEST_MODULES"], "w").write(json.dumps(sorted(
    m for m in sys.modules if m.split(".")[0] in ("torch", "tensorboardX")))))
from sweeps.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(spec: Path, out: Path, env: dict, modules: Path | None = None) -> subprocess.CompletedProcess:
    """`tsweep run SPEC` at the smoke profile; with ``modules``, the driver lists there the torch modules it loaded."""
    args = ["run", str(spec), "--profile", "smoke", "--out", str(out), "--num-cpus", "2"]
    if modules:
        env = dict(env, TSWEEP_TEST_MODULES=str(modules))
        r = subprocess.run([sys.executable, "-c", DRIVER_PROBE, *args], capture_output=True, text=True, env=env,
                           timeout=900, cwd=ROOT)  # fmt: skip
    else:
        r = tsweep(*args, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.fixture(scope="session")
def smoke_sweep(fixture_corpus, fixture_data_dir, tmp_path_factory):
    """tests/specs/smoke.yaml (two rows x two seeds) run once: (sweep directory, its `tsweep run`, wall seconds).
    Read it; to change it, work on ``copy_sweep(path, tmp_path / ...)``. The torch modules its driver process
    loaded are listed in driver_modules.json beside the sweep directory."""
    out = tmp_path_factory.mktemp("smoke") / "sweep"
    start = time.time()
    r = _run(SMOKE, out, e2e_env(fixture_data_dir), modules=out.parent / "driver_modules.json")
    return out, r, time.time() - start


@pytest.fixture(scope="session")
def smoke_search(fixture_corpus, fixture_data_dir, tmp_path_factory):
    """tests/specs/search-smoke.yaml (five Optuna samples) run once: (sweep directory, its `tsweep run`)."""
    out = tmp_path_factory.mktemp("search") / "sweep"
    return out, _run(SEARCH_SMOKE, out, e2e_env(fixture_data_dir))
