"""train_and_evaluate: one configuration in, honest numbers out; resumable from its workdir.

Everything a run writes lies under ``workdir`` (the names are rundir's):

    config.json          the RunConfig and its content hash
    metrics.jsonl        one line per training log interval and per evaluation
    attempts.jsonl       one line per start or resumption
    checkpoints/         step-<n>.pt, the newest few (model, optimiser, data position, RNG)
    dev.hyp, test.hyp    detokenised beam-search output (translation)
    samples.txt          greedy samples from test prompts (task=lm)
    result.json          the summary (status finished or diverged)
    tracking.jsonl       the JSON tracker's log when no other tracker is given

Checkpoints hold only tensors and plain containers and load with ``weights_only=True``; an
unreadable one (a truncated file) is set aside and the next newest one is used.

The loop is the same for both tasks (``task``: translation, or lm, a decoder-only language model
whose N is its number of layers): trainer.py holds its state, checkpoints and the divergence rule;
translation_task.py and lm_task.py what each task evaluates and reports.
"""

from __future__ import annotations

import logging
import platform
import time
from pathlib import Path
from typing import Optional

import torch  # noqa: F401  (tests patch train.torch.save)

from . import rundir
from .distributed import barrier, world
from .optim import average_state_dicts
from .run_config import RunConfig
from .rundir import Status
from .tracking import JsonTracker, Tracker
from .trainer import (
    Progress,
    Trainer,
    claim_workdir,
    is_eval_step,
    load_checkpoint,
    result_base,
    save_checkpoint,
    task_for,
)

log = logging.getLogger(__name__)

__all__ = ["train_and_evaluate"]


def train_and_evaluate(
    config: RunConfig, workdir, tracker: Optional[Tracker] = None, progress: Optional[Progress] = None
) -> dict:
    """Train ``config`` under ``workdir`` (resuming if it holds checkpoints) and evaluate it.

    Returns the result dict also written to ``workdir/result.json``.  A non-finite training loss,
    or one far above a uniform guess for several logging windows (DivergenceRule), ends the run with
    status "diverged" (a result, not an error).
    """
    started = time.time()
    workdir = Path(workdir)
    task = task_for(config)  # a setting the task cannot use fails here, in one line, before anything is written
    rank, _ = world()
    if rank == 0:
        claim_workdir(config, workdir)
    barrier()
    result_path = workdir / rundir.RESULT
    done = rundir.finished_result(workdir, config.content_hash(), warn=True)
    if done:
        return done
    tracker = tracker or JsonTracker(workdir / rundir.TRACKING if rank == 0 else workdir / f"tracking.rank{rank}.jsonl")
    tr = Trainer(config, workdir, tracker, progress, task)
    resumed = tr.resume()
    if rank:
        return _follow(tr)
    rundir.append_json(
        workdir / rundir.ATTEMPTS,
        {"time": time.time(), "host": platform.node(), "from_step": tr.step, "workers": tr.world},
    )
    if not resumed:
        tracker.log_params({**config.flat(), "params": tr.params, "config_hash": config.content_hash()})
    t = config.train
    while tr.step < t.steps:
        loss, rec, diverged = tr.advance()
        if rec:
            rundir.append_json(workdir / rundir.METRICS, rec)
            tracker.log_metrics({k: v for k, v in rec.items() if k not in ("kind", "step")}, tr.step)
        if diverged:
            return _diverged(tr, started, result_path, diverged)
        if is_eval_step(tr.step, t):
            _evaluate_and_checkpoint(tr)
        if progress:
            progress(
                {
                    "step": tr.step,
                    "steps": t.steps,
                    "loss": loss,
                    "lr": tr.opt.param_groups[0]["lr"],
                    "tokens": tr.tokens,
                    "train_seconds": tr.seconds["train"] + tr.seconds["data"],
                    "dev_bleu": tr.last_eval.get("dev_bleu"),  # None before the first BLEU, and for task=lm
                    **{k: tr.last_eval.get(k) for k in task.tracked},
                    "evaluated": tr.last_eval.get("step") == tr.step,
                }
            )
    return _finish(tr, started, result_path)


def _evaluate_and_checkpoint(tr: Trainer) -> None:
    """Rank 0 at an eval step: evaluate, log, write the task's files and a checkpoint; then meet the other workers."""
    ev, files = tr.evaluate()
    tr.last_eval = ev
    rundir.append_json(tr.workdir / rundir.METRICS, {"kind": "eval", **ev})
    tr.tracker.log_metrics({k: ev[k] for k in tr.task.tracked if ev.get(k) is not None}, tr.step)
    for name, lines in files.items():
        rundir.write_lines(tr.workdir / name, lines)
    save_checkpoint(tr.workdir, tr.state(), keep=max(tr.cfg.train.average_last, 1))
    barrier()


def _diverged(tr: Trainer, started: float, result_path: Path, reason: str) -> dict:
    result = {**result_base(tr, started), "status": Status.DIVERGED.value, "diverged_at": tr.step, "reason": reason}
    rundir.write_json(result_path, result)
    log.warning("%s diverged: %s", tr.workdir, reason)
    tr.tracker.set_status("FAILED", reason)
    return result


def _follow(tr: Trainer) -> dict:
    """A worker of rank > 0: train in step with rank 0, which evaluates, checkpoints and reports."""
    t = tr.cfg.train
    while tr.step < t.steps:
        _, _, diverged = tr.advance()
        if diverged:
            return {"status": Status.DIVERGED.value, "rank": tr.rank}
        if is_eval_step(tr.step, t):
            barrier()
    return {"status": Status.WORKER.value, "rank": tr.rank}


def _finish(tr: Trainer, started: float, result_path: Path) -> dict:
    """Test scores from the average of the last k checkpoints (the paper's practice), by the task."""
    t, workdir = tr.cfg.train, tr.workdir
    t0 = time.perf_counter()
    paths = rundir.checkpoints(workdir)[-t.average_last :]
    states = [load_checkpoint(p)["model"] for p in paths]
    final_state = tr.model.state_dict()
    tr.model.load_state_dict(average_state_dicts(states))
    scores, tracked, files = tr.task.final(tr, [rundir.checkpoint_step(p) for p in paths])
    tr.model.load_state_dict(final_state)
    for name, lines in files.items():
        rundir.write_lines(workdir / name, lines)
    tr.seconds["eval"] += time.perf_counter() - t0
    result = {**result_base(tr, started), "status": Status.FINISHED.value, **scores}
    rundir.write_json(result_path, result)
    tr.tracker.log_metrics(tracked, tr.step)
    for name in tr.task.artifacts:
        tr.tracker.log_artifact(str(workdir / name))
    tr.tracker.set_status("FINISHED")
    return result
