"""loss_sync=window: a one-device step's losses are read once per logging window (and at evaluations), so on a GPU
the host queues the next step while the device runs this one.  What a run records must not change: the same
train records, evaluations, results and divergence verdicts as a read every step."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.helpers import tiny_run_config
from transformer_core import rundir, train_and_evaluate, trainer
from transformer_core.tracking import JsonTracker
from transformer_core.trainer import Trainer

TIMED = ("tokens_per_second", "train_seconds", "data_seconds", "eval_seconds", "seconds", "wall_seconds")


def _records(workdir) -> list[dict]:
    lines = (workdir / rundir.METRICS).read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in TIMED} for x in lines]


def _scores(result: dict) -> dict:
    measured = ("peak_rss_gb", "eval_fraction", "finished_at")  # how long and how much memory, not what was learned
    return {k: v for k, v in result.items() if isinstance(v, (int, float)) and "second" not in k and k not in measured}


@pytest.mark.parametrize("values", [dict(P_drop=0.1, accumulate=2), dict(P_drop=0.1, packing="on")],
                         ids=["padded-accumulate-2", "packed"])  # fmt: skip
def test_window_reads_give_the_run_a_read_every_step_gives(fixture_corpus, fixture_data_dir, tmp_path, values):
    runs = {}
    for sync in ("step", "window"):
        cfg = tiny_run_config(fixture_data_dir, steps=17, eval_every=8, loss_sync=sync, **values)
        runs[sync] = (train_and_evaluate(cfg, tmp_path / sync), _records(tmp_path / sync))
    (step_result, step_records), (window_result, window_records) = runs["step"], runs["window"]
    train = [r for r in step_records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [5, 10, 15, 17] and all(math.isfinite(r["loss"]) for r in train)
    assert window_records == step_records  # every train record's losses and lr, every evaluation, in order
    assert step_result["status"] == window_result["status"] == "finished"
    assert _scores(window_result) == _scores(step_result)


def test_window_reads_wait_for_the_device_once_a_window(fixture_corpus, fixture_data_dir, tmp_path, monkeypatch):
    cfg = tiny_run_config(fixture_data_dir, steps=12, eval_every=8, loss_sync="window")
    tr = Trainer(cfg, tmp_path, JsonTracker(tmp_path / "tracking.jsonl"), None)
    monkeypatch.setattr(trainer, "_read_sums", lambda sums: pytest.fail("a per-step read in window mode"))
    unread, records = [], []
    for _ in range(12):
        loss, rec, diverged = tr.advance()
        unread.append(len(tr._unread))
        records.append(rec["step"] if rec else None)
        assert diverged is None and (loss is None) == (tr.step not in (5, 8, 10, 12))
    # read at the log steps 5, 10, the evaluation at 8 and the last step 12; nothing read in between
    assert unread == [1, 2, 3, 4, 0, 1, 2, 0, 1, 0, 1, 0]
    assert records == [None, None, None, None, 5, None, None, None, None, 10, None, 12]
    step_cfg = tiny_run_config(fixture_data_dir, steps=12, eval_every=8, loss_sync="step", device="cpu")
    assert Trainer(step_cfg, tmp_path / "s", JsonTracker(tmp_path / "s.jsonl"), None).lazy is False


@pytest.mark.parametrize("values,at", [(dict(lr_scale=1e30), None), (dict(lr_scale=25, steps=40), 25)],
                         ids=["non-finite", "exploding"])  # fmt: skip
def test_window_reads_find_the_same_divergence(fixture_corpus, fixture_data_dir, tmp_path, monkeypatch, values, at):
    monkeypatch.setattr(trainer, "DIVERGENCE_FACTOR", 1e9)  # the rule after warmup alone (as test_train's)
    results = {}
    for sync in ("step", "window"):
        cfg = tiny_run_config(fixture_data_dir, **{"steps": 20, "eval_every": 40, **values}, loss_sync=sync)
        results[sync] = train_and_evaluate(cfg, tmp_path / sync)
    step, window = results["step"], results["window"]
    assert step["status"] == window["status"] == "diverged"
    assert window["diverged_at"] == step["diverged_at"] and window["reason"] == step["reason"]
    assert _scores(window) == _scores(step)  # steps, target tokens and FLOPs as of the step that diverged
    assert at is None or step["diverged_at"] == at


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_a_packed_graph_trial_reads_its_window_as_a_read_every_step_does(fixture_data_dir, tmp_path):
    """The packed step replayed as a CUDA graph, whose outputs the next replay overwrites: window reads keep each
    step's losses (a copy queued before the next replay) and log what a read every step logs, to the rounding
    of the GPU's kernels, which are not bitwise reproducible."""
    records = {}
    for sync in ("step", "window"):
        cfg = tiny_run_config(fixture_data_dir, steps=12, eval_every=12, packing="on", compile="graphs",
                              device="cuda", loss_sync=sync)  # fmt: skip
        assert train_and_evaluate(cfg, tmp_path / sync)["status"] == "finished"
        records[sync] = [r for r in _records(tmp_path / sync) if r["kind"] == "train"]
    assert [r["step"] for r in records["window"]] == [r["step"] for r in records["step"]] == [5, 10, 12]
    for a, b in zip(records["window"], records["step"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=2e-3) and a["lr"] == b["lr"]
