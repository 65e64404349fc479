"""A blow-up during warmup is a divergence: one logging window above DIVERGENCE_FACTOR x ln V ends the run as
"diverged" at any step, where the rule of three high windows only counts windows after warmup."""

import json
import math
import os
import subprocess
import sys

from tests.helpers import ROOT, TINY_MODEL
from transformer_core import train_and_evaluate
from transformer_core.run_config import make_run_config
from transformer_core.trainer import DIVERGENCE_FACTOR, DIVERGENCE_MARGIN, DivergenceRule

TINY = dict(TINY_MODEL, vocab=400, tokens_per_batch=512, max_train_len=64, eval_sentences=8, beam=1, max_extra=5,
            average_last=1, log_every=5, threads=1)  # fmt: skip


def test_a_window_far_above_ln_v_is_divergence_in_warmup_too():
    rule = DivergenceRule(vocab_size=400, warmup=4000)
    far = DIVERGENCE_FACTOR * math.log(400)
    assert rule.update(0, 5, math.log(400) + DIVERGENCE_MARGIN + 1) is None  # high, not far: warmup may wander
    assert rule.update(5, 10, far - 0.01) is None and rule.high == 0
    reason = rule.update(10, 15, far + 0.01)
    assert f"above {far:.2f} (3 x ln 400" in reason and "up to step 15, during warmup (4000 steps)" in reason
    after = DivergenceRule(vocab_size=400, warmup=10).update(20, 25, 1e5)  # and at once after warmup
    assert after and "during warmup" not in after


def test_a_run_that_blows_up_in_warmup_is_recorded_diverged(fixture_corpus, fixture_data_dir, tmp_path):
    """lr_scale 1e6 with the paper's 4,000 warmup steps and 20 steps: every window is in warmup, the loss goes
    far above ln V (it stays finite for a while); before the warmup rule this run was recorded finished."""
    cfg = make_run_config({**TINY, "data_dir": str(fixture_data_dir), "steps": 20, "eval_every": 20,
                           "warmup": 4000, "lr_scale": 1e6})  # fmt: skip
    result = train_and_evaluate(cfg, tmp_path)
    assert result["status"] == "diverged", result.get("reason")
    assert "during warmup (4000 steps)" in result["reason"] or "non-finite" in result["reason"]
    assert result["diverged_at"] < 20
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "diverged"
    losses = [json.loads(x)["loss"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"train"' in x]
    assert losses and losses[-1] > DIVERGENCE_FACTOR * math.log(result["vocab_size"])


def test_tsweep_train_says_diverged_for_a_warmup_blow_up(fixture_corpus, fixture_data_dir, tmp_path):
    env = dict(os.environ, TSWEEP_DATA_DIR=str(fixture_data_dir))
    work = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "sweeps.cli", "train", "--profile", "smoke", "--workdir", str(work), "--quiet",
         "--set", "lr_scale=1e6", "steps=60", "warmup=4000"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    assert "run diverged: training loss" in r.stdout and "during warmup (4000 steps)" in r.stdout
    assert "Traceback" not in r.stderr
    assert json.loads((work / "result.json").read_text())["status"] == "diverged"
