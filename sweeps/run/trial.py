"""The thin adapter between a sweep and train_and_evaluate: a TrialRecord in, its result.json out (TrialResult).

No Ray here: the runner wraps ``run_trial`` for Ray Tune, and tests or a
debugger can call it directly.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Optional, cast

from analysis.data.metrics import eval_report
from sweeps.state.records import TrialResult
from sweeps.state.storage import open_storage
from sweeps.state.sweep_state import check_inside
from transformer_core.run_config import make_run_config
from transformer_core.rundir import (
    DONE,
    FAULTS,
    RESULT,
    TRIAL,
    Status,
    TrialRecord,
    check_name,
    finished_result,
    loads,
    write_json,
)


def trial_workdir(sweep_dir: str | Path, trial_id: str) -> Path:
    """``SWEEP/trials/ID``, refused unless the id is a plain name and the path stays inside the sweep."""
    return check_inside(sweep_dir, Path(sweep_dir) / "trials" / check_name(trial_id, "trial id"))


def read_result(trial: TrialRecord) -> TrialResult:
    """A trial's result.json, wherever the sweep lives."""
    store = open_storage(trial.sweep_dir)
    if store:
        return loads(store.read_text(f"trials/{trial.id}/{RESULT}"))
    return loads((trial_workdir(trial.sweep_dir, trial.id) / RESULT).read_text())


def run_trial(trial: TrialRecord, report: Optional[Callable[[dict], None]] = None) -> TrialResult:
    """Run one trial of the sweep (a TrialRecord: the run keys, where the sweep lives, its MLflow parent).

    It writes the record as trial.json, trains (resuming from its own checkpoint), and returns result.json's
    content; a trial that already finished for this config returns its result without training."""
    from transformer_core import train_and_evaluate
    from transformer_core.distributed import world

    store, rank = open_storage(trial.sweep_dir), world()[0]
    remote = f"trials/{trial.id}"
    check_name(trial.id, "trial id")
    if store:  # a URI: work in this node's scratch, starting from what the trial pushed before (on any node)
        workdir = store.scratch / _node()[:12] / "trials" / (trial.id + (f".rank{rank}" if rank else ""))
        store.pull(remote, workdir)
    else:
        workdir = trial_workdir(trial.sweep_dir, trial.id)
    workdir.mkdir(parents=True, exist_ok=True)
    push = (lambda: store.push(workdir, remote)) if store and rank == 0 else (lambda: 0)
    config = make_run_config(trial.values, trial.preset)
    done = cast(Optional[TrialResult], finished_result(workdir, config.content_hash()))  # result.json, parsed
    if done:  # re-dispatched after it ended (a resume): its MLflow run stays as it ended
        if store:
            shutil.rmtree(workdir, ignore_errors=True)
        return done
    if rank == 0:
        with open(workdir / "sessions.jsonl", "a") as f:  # each start: on which node, in which process
            line = {"time": time.time(), "node": _node(), "pid": os.getpid(), "workdir": str(workdir)}
            f.write(json.dumps(line) + "\n")
        write_json(workdir / TRIAL, trial.to_json())
        push()
    tracker = None
    tr = trial.tracking
    if tr:
        from .tracking import MlflowTracker

        tags = {
            "group": trial.group,
            "row": trial.row,
            "seed": trial.seed,
            "config_hash": config.content_hash(),
            "profile": trial.profile.get("profile"),
            "trial_id": trial.id,
            "node": _node(),
            "units": "d_model, N, ...: as the run trained (scaled by the profile); paper.*: the paper's units",
        }
        tracker = MlflowTracker(tr["uri"], tr["experiment_id"], tr["parent_run_id"], workdir, trial.id, tags)
        if rank == 0 and trial.paper:  # the knobs as the report shows them, under names of their own
            tracker.log_params({f"paper.{k}": v for k, v in trial.paper.items()})

    def progress(p: dict) -> None:
        if p.get("evaluated"):  # a checkpoint was just written
            push()
            reported = eval_report(p)  # the task's at-eval metrics (analysis.data.metrics); none without the sweep's
            if report and reported:
                report(reported)

    result: TrialResult = train_and_evaluate(config, workdir, tracker, progress)
    faults = _faults(workdir)
    if faults and rank == 0 and result.get("status") in DONE:  # the driver's record of this trial's failed workers
        result = {**result, "faults": faults}
        write_json(workdir / RESULT, result)
    if tracker and result.get("status") == "finished":
        tracker.log_params({"profile_rules": json.dumps(trial.profile)})
    push()
    if store and result.get("status") in (*DONE, Status.WORKER):
        shutil.rmtree(workdir, ignore_errors=True)  # everything is at the URI now; scratch is not an archive
    return result


def _faults(workdir: Path) -> list[str]:
    """The reasons in the trial's faults.jsonl (each failed worker the driver saw), oldest first."""
    out: list[str] = []
    try:
        lines = (workdir / FAULTS).read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("reason"), str):
            out.append(rec["reason"][:300])
    return out


def _node() -> str:
    import socket

    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # ray absent or not in a worker
        pass
    return socket.gethostname()
