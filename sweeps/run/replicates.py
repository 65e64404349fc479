"""The seeds of one search sample (``seeds: N`` in a search spec), run side by side as Ray tasks inside the
sample's Tune trial, so that the searcher and the scheduler see their mean.

Each seed is a sweep trial of its own (its workdir, result.json and MLflow run: sample-<hash>-s<seed>-...).
The Tune trial reports, at every evaluation step that all its seeds have reached, the mean of their dev
metrics and their seed sd (``<metric>_seed_sd``): ASHA's rungs compare means over the seeds that reached
them, and Optuna is told the mean of the finished seeds.  The seed tasks are children of the trial: when
ASHA stops the trial, Ray ends them with it.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable

import numpy as np

from analysis.data.metrics import AT_EVAL
from sweeps.spec.profiles import get_profile
from sweeps.spec.sweep_spec import Spec, sample_trials
from sweeps.state.records import TrialResult
from transformer_core.errors import UserError
from transformer_core.knobs import KnobValue
from transformer_core.rundir import TrialRecord

log = logging.getLogger(__name__)
REPORTED = AT_EVAL  # what run_trial reports at an evaluation (analysis.data.metrics.eval_report)


def mean_report(reports: list[dict]) -> dict:
    """One report of a sample from its seeds' reports at the same step: the mean of each metric (a diverged seed's
    infinite perplexity makes the mean infinite, as the searcher should see it) and the seed sd beside it."""
    out = {"step": reports[0].get("step"), "seeds": len(reports), "done": False}
    for key in REPORTED:
        vals = [float(r[key]) for r in reports if r.get(key) is not None]
        if len(vals) == len(reports):
            out[key] = float(np.mean(vals))
            finite = [v for v in vals if math.isfinite(v)]
            out[f"{key}_seed_sd"] = float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan")
    return out


def mean_final(finals: list[dict]) -> dict:
    """The sample's final metrics from its seeds' (tune_adapter._final_metrics of each): the mean of every number,
    the seed sd of each, status finished when any seed finished (the means are over what the seeds scored)."""
    out: dict[str, Any] = {"done": True, "seeds": len(finals)}
    for key in finals[0]:
        vals = [f.get(key) for f in finals]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) == len(vals):
            out[key] = float(np.mean(nums))
            finite = [float(v) for v in nums if math.isfinite(v)]
            out[f"{key}_seed_sd"] = float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan")
    statuses = [f.get("status") for f in finals]
    out["status"] = "finished" if "finished" in statuses else statuses[0]
    out["seed_status"] = ",".join(str(s) for s in statuses)
    return out


class StepMeans:
    """Collects the seeds' evaluation reports; ``ready()`` gives the mean report of every step all seeds reached,
    once each, in step order."""

    def __init__(self, seeds: int):
        self.seeds = seeds
        self.by_step: dict[Any, dict[int, dict]] = {}  # step -> seed index -> its report
        self.done: set = set()

    def add(self, index: int, report: dict) -> None:
        self.by_step.setdefault(report.get("step"), {})[index] = report

    def ready(self) -> list[dict]:
        out = []
        for step in sorted(s for s in self.by_step if s is not None):
            if step not in self.done and len(self.by_step[step]) == self.seeds:
                self.done.add(step)
                out.append(mean_report([self.by_step[step][i] for i in sorted(self.by_step[step])]))
        return out


def _seed_task(record: TrialRecord, queue, index: int) -> TrialResult:
    from .trial import run_trial

    return run_trial(record, report=lambda m: queue.put((index, m)))


def run_replicates(records: list[TrialRecord], cpus: float, gpus: float, report: Callable[[dict], None],
                   final: Callable[[TrialResult], dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """Run the seeds ``records`` of one sample as Ray tasks (``cpus``/``gpus`` each, inside the trial's placement
    group), ``report`` the mean at each step every seed reached; returns the mean of ``final`` over the seeds."""
    import ray
    from ray.util.queue import Empty, Queue

    queue = Queue(actor_options={"num_cpus": 0})  # inside the trial's placement group: it must take no CPU
    task = ray.remote(_seed_task).options(num_cpus=cpus, num_gpus=gpus, max_retries=2)
    refs = [task.remote(r, queue, i) for i, r in enumerate(records)]
    means, pending = StepMeans(len(records)), list(refs)
    while True:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0) if pending else ([], [])
        while True:  # every report so far, then the means of the steps all seeds reached
            try:
                index, m = queue.get_nowait()
            except Empty:
                break
            means.add(index, m)
        for m in means.ready():
            report(m)
        if not pending and queue.empty():
            break
    results = ray.get(refs)
    log.info("sample of %d seeds: %s", len(results), [r.get("status") for r in results])
    return mean_final([final(r) for r in results])


def sample_records(
    spec: Spec, profile_name: str, sampled: dict[str, KnobValue], first: TrialRecord
) -> list[TrialRecord]:
    """The trials of one sampled configuration, one per seed of the spec, as payloads like ``first``."""
    trials = sample_trials(spec, get_profile(profile_name), sampled)
    return [t.record(first.sweep_dir, first.tracking, first.preset, sampled) for t in trials]


TOKEN_CPU = 0.01  # the trial's own share of its placement group: it only waits on its seeds


def seed_cpus(spec: Spec) -> float:
    """CPUs of one seed task: the spec's, less its part of the trial's token (N seeds hold N x cpus in all)."""
    return spec.resources.cpus - TOKEN_CPU / len(spec.seeds)


def sample_resources(spec: Spec):
    """What a Tune trial of a search with several seeds holds: a placement group of a token bundle for the trial
    itself and one bundle per seed task (Tune schedules the trial's child tasks into it), or None with one seed."""
    if not spec.search or len(spec.seeds) < 2:
        return None
    if spec.resources.workers > 1:
        raise UserError("seeds: a search with several seeds runs each seed as a task of one worker; "
                        "resources.workers > 1 (data-parallel trials) is allowed with one seed only")  # fmt: skip
    import ray
    from ray.tune import PlacementGroupFactory

    need, have = len(spec.seeds) * spec.resources.cpus, ray.cluster_resources().get("CPU", 0)
    if need > have + 1e-9:  # the placement group could never be placed: Tune would wait for ever
        raise UserError(
            f"seeds: {len(spec.seeds)} seeds x resources.cpus {spec.resources.cpus} = {need:g} "
            f"CPUs per sample, but Ray has {have:g}: give fewer seeds or cpus, or more --num-cpus"
        )
    seed = {"CPU": seed_cpus(spec), **({"GPU": spec.resources.gpus} if spec.resources.gpus else {})}
    return PlacementGroupFactory([{"CPU": TOKEN_CPU}] + [seed] * len(spec.seeds))
