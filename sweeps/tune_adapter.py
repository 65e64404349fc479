"""What Ray Tune sees of a sweep: the function trainable, a data-parallel trial (Ray Train), the parameter
space and TuneConfig of a round, trial names, and the summary of a finished Tune run.

``sweeps/runner.py`` owns the sweep's life (open, rounds, close); this module only adapts one round of trials
to Tune.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Callable, Optional

from transformer_core.rundir import TrialRecord

from .lock import root_cause
from .profiles import get_profile
from .spec import Spec, search_trial
from .storage import is_uri
from .trial import read_result, run_trial

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _final_metrics(result: dict) -> dict:
    diverged = result.get("status") != "finished"
    if result.get("task") == "lm":  # a language model: perplexity and bits per byte, no BLEU
        scores = {k: float("inf") if diverged else result[k] for k in ("dev_ppl", "dev_bpb", "test_ppl", "test_bpb")}
    else:
        scores = {
            "dev_bleu": 0.0 if diverged else result["dev_bleu"],
            "dev_ppl": float("inf") if diverged else result["dev_ppl"],
            "test_bleu": 0.0 if diverged else result["test_bleu"],
        }
    return {
        **scores,
        "status": result.get("status"),
        "done": True,
        "step": result.get("steps"),
    }


def trial_function(
    config: dict, payloads: list, search_keys: tuple = (), workers: int = 1, gpus: float = 0, spec=None, profile=None
):
    """Ray Tune function trainable: one trial, intermediate dev metrics reported for schedulers."""
    from ray import tune

    if search_keys:  # a search suggestion: a trial of the base row with the sampled knobs, expanded like a row
        sampled = {k: config[k] for k in search_keys}
        first = payloads[0]
        trial = search_trial(spec, get_profile(profile), sampled).record(first.sweep_dir, first.tracking, first.preset,
                                                                         sampled)  # fmt: skip
    else:
        trial = payloads[config["trial_index"]]
    if workers > 1:
        metrics = data_parallel(trial, workers, gpus)
    else:
        result = run_trial(trial, report=lambda m: tune.report({**m, "tsweep_trial": trial.id}))
        metrics = _final_metrics(result)
    tune.report({**metrics, "tsweep_trial": trial.id})


# the name Tune records with an experiment: a search started before this module existed restores only with it;
# the module-level alias lets pickle find the function by that name
trial_function.__name__ = trial_function.__qualname__ = "_trainable"
_trainable = trial_function


def _ddp_worker(loop_config: dict) -> None:
    """One Ray Train worker of a data-parallel trial; rank 0 tracks, evaluates and writes the result."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    trial = loop_config["trial"]
    run_trial(dataclasses.replace(trial, tracking=None) if rank else trial)


def data_parallel(trial: TrialRecord, workers: int, gpus: float) -> dict:
    """Train one trial with Ray Train's TorchTrainer (DDP-style gradient sums; gloo on CPU, NCCL on GPU)."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(
        _ddp_worker,
        train_loop_config={"trial": trial},
        scaling_config=ScalingConfig(
            num_workers=workers, use_gpu=gpus > 0, resources_per_worker={"CPU": 1, "GPU": 1} if gpus > 0 else {"CPU": 1}
        ),
        run_config=RunConfig(name=f"ddp-{trial.id}", storage_path=join_location(trial.sweep_dir, "ddp")),
    )
    trainer.fit()
    return _final_metrics(read_result(trial))


def join_location(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}" if is_uri(location) else str(Path(location) / name)


def _search_domain(dist: dict):
    from ray import tune

    kind = dist["type"]
    if kind == "choice":
        return tune.choice(dist["values"])
    if kind == "int":
        return tune.randint(dist["low"], dist["high"] + 1)
    return (tune.loguniform if kind == "loguniform" else tune.uniform)(dist["low"], dist["high"])


def param_space(spec: Spec, payloads: list) -> dict:
    from ray import tune

    if spec.search:
        return {k: _search_domain(d) for k, d in spec.search["space"].items()}
    return {"trial_index": tune.grid_search(list(range(len(payloads))))}


def round_config(spec: Spec, sweep_dir: Path, payloads: list, time_budget: Optional[float] = None):
    """TuneConfig of one round; ``time_budget`` (seconds) stops every trial when it is spent (Tune's
    TimeoutStopper): a stopped trial keeps its checkpoints, so ``--resume`` continues it."""
    from ray.tune import TuneConfig

    scheduler = search_alg = None
    if spec.scheduler["type"] == "asha":
        from ray.tune.schedulers import ASHAScheduler

        s = spec.scheduler
        scheduler = ASHAScheduler(
            time_attr="training_iteration",
            max_t=s.get("max_t", 100),
            grace_period=s["grace_period"],
            reduction_factor=s["reduction_factor"],
        )
    if spec.search:
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        storage = optuna.storages.RDBStorage(f"sqlite:///{sweep_dir / 'optuna.db'}")
        search_alg = OptunaSearch(
            metric=spec.metric, mode=spec.mode, study_name=spec.name, storage=storage, seed=spec.search["seed"]
        )
    return TuneConfig(
        trial_name_creator=_trial_namer(payloads),
        trial_dirname_creator=_trial_namer(payloads),
        metric=spec.metric,
        mode=spec.mode,
        scheduler=scheduler,
        search_alg=search_alg,
        num_samples=spec.search["samples"] if spec.search else 1,
        max_concurrent_trials=spec.max_concurrent,
        time_budget_s=max(time_budget, 1e-3) if time_budget is not None else None,
    )


def _trial_namer(payloads: list) -> Callable:
    """Tune's name for a trial: its row and seed (A1-s1), not _trainable_xxxxx."""
    names = {i: f"{p.row}-s{p.seed}" for i, p in enumerate(payloads)}
    return lambda trial: names.get((trial.config or {}).get("trial_index")) or f"search-{trial.trial_id}"


def summarise(grid, payloads: list) -> dict:
    out = {}
    for r in grid:
        m, index = r.metrics or {}, (r.config or {}).get("trial_index")
        key = m.get("tsweep_trial") or (payloads[index].id if index is not None else Path(r.path).name)
        out[key] = {
            "error": _one_line(r.error) if r.error else None,
            "status": m.get("status"),
            "dev_bleu": m.get("dev_bleu"),
            "reports": m.get("training_iteration"),
            "config": r.config,
        }
    return out


def _one_line(error: BaseException) -> str:
    """What went wrong in a trial, in one line: the innermost error, not Ray's wrapper around it."""
    cause = root_cause(error)
    first = _ANSI.sub("", next((x for x in str(cause).splitlines() if x.strip()), ""))
    return f"{type(cause).__name__}: {first}".strip()


class EchoCallback:
    """One line per trial that ends, beside Tune's own status table."""

    def __new__(cls, echo, total, sync=lambda: 0):
        from ray.tune import Callback

        class Echo(Callback):
            ended = 0

            def on_trial_complete(self, iteration, trials, trial, **info):
                m = trial.last_result or {}
                self.ended += 1
                sync()
                if echo is None:  # the live view prints trial events
                    return
                echo(
                    f"[{self.ended}/{total}] {m.get('tsweep_trial', trial.trial_id)}: {m.get('status', 'stopped')} "
                    + (
                        f"dev_bpb={m['dev_bpb']:.3f}"
                        if m.get("dev_bpb") is not None
                        else f"dev_bleu={m.get('dev_bleu', float('nan')):.2f}"
                    )  # fmt: skip
                    + f" step={m.get('step')}"
                )

            def on_trial_error(self, iteration, trials, trial, **info):
                if echo is not None:
                    echo(f"trial {trial.trial_id} failed (Ray retries it from its checkpoint up to 2 times)")

        return Echo()
