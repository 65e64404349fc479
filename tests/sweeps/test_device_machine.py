"""What a GPU machine runs needs neither ray, optuna nor mlflow: users' GPU nodes (and this project's device machine)
may lack them, and `tsweep train` and `tsweep bench-device` are what such a node runs on its own.

The commands run in a child Python whose import system refuses those packages (a sitecustomize on PYTHONPATH), on a
copy of the fixture corpus's data directory, so nothing they store reaches other tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.helpers import GPU_MACHINE_MISSING as MISSING
from tests.helpers import ROOT, gpu_machine_site


def _child_env(tmp_path, data_dir) -> dict:
    site = gpu_machine_site(tmp_path / "site")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "TSWEEP_DATA_DIR": str(data_dir),
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def _tsweep(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeps.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)  # fmt: skip


def test_train_and_bench_device_run_without_ray_optuna_or_mlflow(tmp_path, fixture_corpus, fixture_data_dir):
    data = tmp_path / "data"
    shutil.copytree(fixture_data_dir, data, ignore=shutil.ignore_patterns("device-bench.json"))
    env = _child_env(tmp_path, data)
    for name in MISSING[:3]:  # the child really lacks them
        r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, env=env)
        assert r.returncode != 0 and "this machine has none" in r.stderr, (name, r.stderr[-500:])

    small = ["--set", "N=1", "d_model=32", "d_ff=64", "h=2", "tokens_per_batch=256"]
    bench = _tsweep(env, "bench-device", "--profile", "smoke", "--corpus", "bible-en-de", "--steps", "1",
                    "--windows", "1", "--warmup", "0", *small)  # fmt: skip
    assert bench.returncode == 0 and "Traceback" not in bench.stderr, bench.stderr[-3000:]
    stored = json.loads((data / "device-bench.json").read_text())
    assert stored["models"] and all(r["flops_per_second"] > 0 for r in stored["models"].values())

    work = tmp_path / "run"
    train = _tsweep(env, "train", "--profile", "smoke", "--corpus", "bible-en-de", "--workdir", work, "--quiet",
                    *small, "--set", "steps=2", "eval_every=2", "beam=1", "max_extra=0")  # fmt: skip
    assert train.returncode == 0 and "Traceback" not in train.stderr, train.stderr[-3000:]
    result = json.loads((work / "result.json").read_text())
    assert result["status"] == "finished" and result["steps"] == 2, {k: result.get(k) for k in ("status", "steps")}
