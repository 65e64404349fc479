"""Scale-out on loopback only: Ray Train data parallelism, a two-node Ray cluster on 127.0.0.1."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from transformer_core.run_config import make_run_config

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(N=1, d_model=48, d_ff=96, h=4, d_k=12, d_v=12, P_drop=0.0, vocab=400, tokens_per_batch=512,
            warmup=10, eval_sentences=8, beam=2, max_extra=10, threads=1, log_every=2, average_last=1,
            steps=8, eval_every=8)


def _losses(workdir):
    return [json.loads(x)["loss"] for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


def test_two_gloo_workers_follow_one_worker_with_accumulation(fixture_corpus, fixture_data_dir, tmp_path):
    import ray

    from sweeps.runner import _data_parallel
    from transformer_core import train_and_evaluate

    values = {**TINY, "data_dir": str(fixture_data_dir), "accumulate": 2}
    single = train_and_evaluate(make_run_config(values), tmp_path / "one")
    trial = {"id": "two", "group": "base", "row": "base", "seed": 1, "values": values, "preset": "base",
             "profile": {"profile": "test"}, "sweep_dir": str(tmp_path), "tracking": None}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        metrics = _data_parallel(trial, workers=2, gpus=0)
    finally:
        ray.shutdown()
    assert metrics["status"] == "finished"
    two = json.loads((tmp_path / "trials" / "two" / "result.json").read_text())
    assert two["target_tokens"] == single["target_tokens"]
    assert _losses(tmp_path / "trials" / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-4)
    attempts = json.loads((tmp_path / "trials" / "two" / "attempts.jsonl").read_text().splitlines()[0])
    assert attempts["workers"] == 2
