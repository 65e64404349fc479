"""What Ray Tune sees of a sweep: one round's Tune run (``fit_round``), the function trainable, a data-parallel
trial (Ray Train), the parameter space and TuneConfig of a round, trial names, and the summary of a Tune run.

``sweeps/run/runner.py`` owns the sweep's life (open, rounds, close); this module only adapts one round of trials
to Tune.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from analysis.data.metrics import final_report
from sweeps.spec.sweep_spec import Scheduler, Spec, Trial
from sweeps.state.diskfull import out_of_memory, root_cause
from sweeps.state.live import LiveView
from sweeps.state.records import RoundRecord, Summary, TrialResult
from sweeps.state.search_state import SearchPlan, storage_url
from sweeps.state.storage import Storage, is_uri
from transformer_core.errors import UserError
from transformer_core.knobs import KnobValue
from transformer_core.rundir import FAULTS, SAFE_NAME, TrialRecord, check_name

from .interrupts import INTERRUPTS
from .replicates import run_replicates, sample_records, sample_resources, seed_cpus
from .trial import read_result, run_trial
from .worker_memory import after_trial, bounded_reuse_installed

if TYPE_CHECKING:
    from ray.tune import Callback

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
Echo = Callable[[str], None]  # one line for the user (print, or the CLI's)
# Tune's config of one trial: {"trial_index": i} in a grid round (param_space), the knobs Optuna sampled in a search
# round.  A dict: Tune makes it from param_space and hands it to the trainable in the worker.
TuneConfig = dict[str, KnobValue]


@dataclass(frozen=True)
class TuningContext:
    """What one round's Tune run (``fit_round``) takes of the open sweep (runner.SweepContext.tuning()): the spec and
    profile, where the sweep lives, the rounds sweep.json records, and three calls back into the sweep: the payload
    of a trial, recording a round in sweep.json (before Tune starts) and pushing the driver's files to a URI.  It
    changes nothing of the sweep itself but through those calls."""

    spec: Spec
    profile_name: str
    location: str  # the sweep as the user named it (a local path or a URI): Tune's storage_path
    sweep_dir: Path  # where this driver writes (the same path, or a scratch copy of a URI sweep)
    store: Optional[Storage]  # a URI sweep's storage, None for a local path
    verbose: bool  # Ray Tune's own status tables instead of the live view
    rounds: tuple[RoundRecord, ...]  # sweep.json's rounds so far: their Tune directories are not used again
    payload: Callable[[Trial], TrialRecord]  # what a worker runs of a trial
    start_round: Callable[[RoundRecord], None]  # append the round to sweep.json's rounds and write it
    sync: Callable[[], None]  # push the driver's small files to a URI sweep (nothing for a local path)
    total: Optional[int] = None  # the live view counts against this many trials (a search's whole plan), else its own
    started: Optional[float] = None  # the live view's elapsed counts from here (the sweep's start), else the round's


def _final_metrics(result: TrialResult) -> dict[str, Any]:
    return {
        **final_report(result),  # the task's objectives (analysis.data.metrics)
        **{k: result.get(k) for k in ("params", "wall_seconds", "train_flops")},  # costs: a second objective
        "status": result.get("status"),
        "done": True,
        "step": result.get("steps"),
    }


def trial_function(config: TuneConfig, payloads: list[TrialRecord], search_keys: tuple[str, ...] = (), workers: int = 1,
                   gpus: float = 0, spec: Optional[Spec] = None, profile: Optional[str] = None) -> None:  # fmt: skip
    """Ray Tune function trainable: one trial, intermediate dev metrics reported for schedulers."""
    from ray import tune

    # two objectives: no scheduler, and Tune wants every objective in every report: the final result only
    progress = not (spec and spec.search and spec.search.objectives)
    if search_keys:  # a search suggestion: a trial of the base row with the sampled knobs, expanded like a row
        assert spec is not None and profile is not None  # fit_round gives them with search keys
        sampled = {k: config[k] for k in search_keys}
        records = sample_records(spec, profile, sampled, payloads[0])
        trial = records[0]
        if len(records) > 1:  # seeds: N: the searcher and the scheduler see the mean over the seeds
            ids = {"tsweep_trial": trial.id, "tsweep_seeds": ",".join(r.id for r in records)}
            report = (lambda m: tune.report({**m, **ids})) if progress else (lambda m: None)
            final = run_replicates(records, seed_cpus(spec), gpus, report, _final_metrics)
            runs = [x for x in (_mlflow_run(r) for r in records) if x]
            tune.report({**final, **ids, **({"mlflow_run_id": ",".join(runs)} if runs else {})})
            return
    else:
        trial = payloads[cast(int, config["trial_index"])]
    if workers > 1:
        metrics = data_parallel(trial, workers, gpus)
    else:
        result = run_trial(trial, report=(lambda m: tune.report({**m, "tsweep_trial": trial.id})) if progress else None)
        metrics = _final_metrics(result)
        if spec is not None:  # a reused worker: what it holds after the trial, and whether to replace it
            metrics.update(after_trial(spec.max_concurrent, spec.resources.cpus))
        run = _mlflow_run(trial)
        if run:
            metrics["mlflow_run_id"] = run
    tune.report({**metrics, "tsweep_trial": trial.id})


def _mlflow_run(trial: TrialRecord) -> Optional[str]:
    """The MLflow child run id the trial recorded in its directory (local sweeps), or None."""
    try:
        from .trial import trial_workdir

        return (trial_workdir(trial.sweep_dir, trial.id) / "mlflow_run_id").read_text().strip() or None
    except Exception:  # noqa: BLE001 - a URI sweep, no tracking: no link to give
        return None


def _ddp_worker(loop_config: dict) -> None:
    """One Ray Train worker of a data-parallel trial; rank 0 tracks, evaluates and writes the result."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    trial = loop_config["trial"]
    run_trial(dataclasses.replace(trial, tracking=None) if rank else trial)


def data_parallel(trial: TrialRecord, workers: int, gpus: float) -> dict[str, Any]:
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


def _round_name(ctx: TuningContext, round_name: str) -> str:
    """A Tune experiment directory of its own for every run of a round (resumes re-plan, never restore):
    nothing Tune wrote before is read again."""
    check_name(round_name, "round name")
    used, store = {r["tune"] for r in ctx.rounds}, ctx.store

    def exists(name: str) -> bool:
        if not store:
            return (ctx.sweep_dir / name).exists()
        from pyarrow import fs

        return store.fs.get_file_info(store.path(name)).type != fs.FileType.NotFound

    k, name = 1, round_name
    while name in used or exists(name):
        k += 1
        name = f"{round_name}-{k}"
    return name


def fit_round(ctx: TuningContext, trials: list[Trial], round_name: str, echo: Echo, time_budget: Optional[float] = None,
              search: Optional[SearchPlan] = None) -> Summary:  # fmt: skip
    """One round of an open sweep (runner.SweepContext.tuning()): a fresh Tuner.fit over ``trials``, never
    Tuner.restore (it would unpickle state from the sweep location); returns the summary of its trials."""
    import signal

    from ray import tune
    from ray.tune import FailureConfig, RunConfig, Tuner

    spec = ctx.spec
    payloads = [ctx.payload(t) for t in trials]
    search_keys = tuple(spec.search.space) if spec.search else ()
    workers, gpus = spec.resources.workers, spec.resources.gpus
    # a data-parallel trial holds no resources itself: its Ray Train workers take one CPU (or GPU) each
    resources = {"cpu": spec.resources.cpus, "gpu": gpus} if workers == 1 else {"cpu": 0.01, "gpu": 0}
    resources = sample_resources(spec) or resources  # a search with several seeds: one bundle per seed
    trainable = tune.with_resources(
        tune.with_parameters(
            trial_function,
            payloads=payloads,
            search_keys=search_keys,
            workers=workers,
            gpus=gpus,
            spec=spec,
            profile=ctx.profile_name,
        ),  # fmt: skip
        resources,
    )
    total = search.samples if search else len(payloads)
    faults = FaultLog(ctx.sweep_dir if not ctx.store else None, payloads, print)  # always said, live view or not
    name = _round_name(ctx, round_name)
    tune_config = round_config(spec, ctx.sweep_dir, payloads, time_budget, search)
    tuner = Tuner(
        trainable,
        param_space=param_space(spec, payloads),
        tune_config=tune_config,
        run_config=RunConfig(
            name=name,
            storage_path=ctx.location,
            verbose=1 if ctx.verbose else 0,
            failure_config=FailureConfig(max_failures=2),
            callbacks=[echo_callback(echo if ctx.verbose else None, total, ctx.sync, faults=faults), *_loggers()],
        ),
    )
    ctx.start_round({"name": round_name, "tune": name, "started": time.time(), "trials": total})
    # Tune's new output engine prints a config box and a TensorBoard hint even at verbose=0; the legacy
    # engine at verbose=0 prints nothing, and the live view speaks instead
    os.environ["RAY_AIR_NEW_OUTPUT"] = "1" if ctx.verbose else "0"
    handler = signal.getsignal(signal.SIGINT)
    deadline = time.time() + time_budget if time_budget is not None else None
    view = None if ctx.verbose else _live_view(ctx, deadline).start()
    loggers_before = os.environ.get(NO_AUTO_LOGGERS)
    os.environ[NO_AUTO_LOGGERS] = "1"  # the loggers are _loggers()'s
    try:
        grid = tuner.fit()  # a signal: Tune's graceful stop (interrupts.py), or Tune's own SIGINT handler
    finally:
        if loggers_before is None:
            os.environ.pop(NO_AUTO_LOGGERS, None)
        else:
            os.environ[NO_AUTO_LOGGERS] = loggers_before
        if view:
            view.stop()
        if handler is not None:
            signal.signal(signal.SIGINT, handler)  # Tune leaves its own handler installed
    stopped: set[str] = getattr(tune_config.scheduler, "stopped_early", set())
    return summarise(grid, payloads, frozenset(stopped))


def _live_view(ctx: TuningContext, deadline: Optional[float] = None) -> LiveView:
    """The user's view of this round: rows and seeds from the sweep's files (a URI sweep: its pulled view)."""
    # counts and elapsed over the whole sweep (a search's plan, the sweep's start), not this round's
    if ctx.store:
        return LiveView(ctx.sweep_dir, ctx.spec.max_concurrent, interval=15.0, refresh=ctx.store.view,
                        deadline=deadline, total=ctx.total, started=ctx.started)  # fmt: skip
    return LiveView(ctx.sweep_dir, ctx.spec.max_concurrent, deadline=deadline, total=ctx.total, started=ctx.started)


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


def param_space(spec: Spec, payloads: list[TrialRecord]) -> dict[str, Any]:
    from ray import tune

    if spec.search:
        return {k: _search_domain(d) for k, d in spec.search.space.items()}
    return {"trial_index": tune.grid_search(list(range(len(payloads))))}


def round_config(spec: Spec, sweep_dir: Path, payloads: list[TrialRecord], time_budget: Optional[float] = None,
                 search: Optional[SearchPlan] = None):  # fmt: skip
    """TuneConfig of one round; ``time_budget`` (seconds) stops every trial when it is spent (Tune's
    TimeoutStopper): a stopped trial keeps its checkpoints, so ``--resume`` continues it.  A search samples
    what ``search`` (search_state.plan_search) says, from the study in the sweep's optuna.db."""
    from ray.tune import TuneConfig

    search_alg = None
    if spec.search:
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        if search is None:
            raise TypeError("a search spec's round samples what its SearchPlan says: give search")

        objectives = spec.search.objectives  # two: Optuna's multi-objective TPE, a Pareto front
        search_alg = _labelled(OptunaSearch)(
            metric=[o["metric"] for o in objectives] if objectives else spec.metric,
            mode=[o["mode"] for o in objectives] if objectives else spec.mode,
            study_name=spec.name,
            storage=optuna.storages.RDBStorage(storage_url(sweep_dir)),
            sampler=optuna.samplers.TPESampler(seed=search.seed),
            points_to_evaluate=search.points or None,
        )
    return TuneConfig(
        trial_name_creator=_trial_namer(payloads),
        trial_dirname_creator=_trial_namer(payloads),
        metric=None if spec.search and spec.search.objectives else spec.metric,  # the searcher's own list
        mode=None if spec.search and spec.search.objectives else spec.mode,
        scheduler=asha(spec.scheduler) if spec.scheduler.type == "asha" else None,
        search_alg=search_alg,
        num_samples=search.samples if spec.search and search else 1,
        max_concurrent_trials=spec.max_concurrent,
        time_budget_s=max(time_budget, 1e-3) if time_budget is not None else None,
        reuse_actors=reuse_actors(spec, payloads),
    )


def _labelled(optuna_search):
    """Ray's OptunaSearch whose study names its metrics (optuna-dashboard shows "dev_bleu", not "Objective 0") and
    whose trials carry, as user attributes, the sweep's trial id, configuration (sample-...), seeds and MLflow run
    id, so that a dashboard's trial leads to the sweep's files, report row and MLflow run."""

    class Labelled(optuna_search):
        def on_trial_complete(self, trial_id, result=None, error=False):
            try:
                ot_trial = self._ot_trials.get(trial_id)
                if ot_trial is not None and self._ot_study is not None:
                    if not self._ot_study.metric_names:
                        self._ot_study.set_metric_names(
                            list(self.metric) if isinstance(self.metric, list) else [self.metric]
                        )
                    for key, value in _user_attrs(result or {}).items():
                        ot_trial.set_user_attr(key, value)
            except Exception as exc:  # noqa: BLE001 - labels are for people; the search goes on without them
                import logging

                logging.getLogger(__name__).info("Optuna trial %s not labelled: %s", trial_id, exc)
            super().on_trial_complete(trial_id, result, error)

    return Labelled


def _user_attrs(result: dict) -> dict:
    """What a finished search trial tells Optuna about itself (JSON-able values only)."""
    out = {}
    tid = result.get("tsweep_trial")
    if isinstance(tid, str):
        out["trial_id"] = tid
        out["configuration"] = tid.rsplit("-s", 1)[0] if tid.startswith("sample-") else tid
    for key in ("tsweep_seeds", "mlflow_run_id", "seed_sd", "status"):
        if isinstance(result.get(key), (str, int, float)) and not isinstance(result.get(key), bool):
            out[key.replace("tsweep_", "")] = result[key]
    return out


def reuse_actors(spec: Spec, payloads: list[TrialRecord]) -> bool:
    """Whether a slot's worker process runs its next trial (Tune's ``reuse_actors``): on unless
    ``TSWEEP_REUSE_ACTORS=0``, for trials that train in the worker's own thread, eagerly.

    A fresh process per trial costs its start, the imports of torch and MLflow, torch's first optimizer and the
    bf16 probe again, every trial (benchmarks/sweep_timeline.py shows it per sweep).  Each trial seeds torch
    itself (tests/sweeps/test_reuse_actors.py runs one after another in a process and compares).  Left off where
    the process would carry more than that, and where its memory cannot be bounded (sweeps/run/worker_memory.py):
    a search's seed tasks and a data-parallel trial's Ray Train workers are the worker's children, which Ray
    ends with the worker when a scheduler stops the trial (a kept worker would leave them training); a compiled
    trial (``compile=on`` or ``graphs``) would find earlier trials' compiled code in the process (torch keeps up
    to 8 per function, then silently runs it uncompiled; a fresh process still finds inductor's on-disk cache)."""
    value = os.environ.get("TSWEEP_REUSE_ACTORS", "1")
    if value not in ("0", "1"):
        raise UserError(f"TSWEEP_REUSE_ACTORS={value!r} is invalid: allowed 1 (default) or 0")
    children = spec.resources.workers > 1 or bool(spec.search and len(spec.seeds) > 1)
    compiled = any(p.values.get("compile") in ("on", "graphs") for p in payloads)
    wanted = value == "1" and not children and not compiled
    # a kept worker is replaced when its memory after a trial passes its bound (worker_memory.py); where this
    # Ray gives no way to do that, no worker is kept
    return wanted and bounded_reuse_installed()


def asha(s: Scheduler):
    """Tune's ASHAScheduler that keeps the sweep trial ids it stopped (``stopped_early``): a trial without a
    result is called stopped early only when the scheduler stopped it, never because it was interrupted."""
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    class RecordingASHA(ASHAScheduler):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.stopped_early: set[str] = set()

        def on_trial_result(self, tune_controller, trial, result: dict) -> str:
            action = super().on_trial_result(tune_controller, trial, result)
            if action == TrialScheduler.STOP and not result.get("done") and result.get("tsweep_trial"):
                self.stopped_early.add(result["tsweep_trial"])
            return action

    return RecordingASHA(time_attr="training_iteration", max_t=s.max_t, grace_period=s.grace_period,
                         reduction_factor=s.reduction_factor)  # fmt: skip


def _trial_namer(payloads: list[TrialRecord]) -> Callable:
    """Tune's name for a trial: its row and seed (A1-s1), not _trainable_xxxxx."""
    names: dict[object, str] = {i: f"{p.row}-s{p.seed}" for i, p in enumerate(payloads)}
    return lambda trial: names.get((trial.config or {}).get("trial_index")) or f"search-{trial.trial_id}"


def _loggers() -> list:
    """Tune's CSV and JSON loggers (its ResultGrid reads a trial's metrics back from their files) without its
    TensorBoard logger, whose tensorboardX imports torch into a driver that otherwise never loads it (the sweep's
    metrics are in MLflow). Tune adds all three while fitting unless NO_AUTO_LOGGERS says not to (fit_round sets it
    for its fit only)."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    return [CSVLoggerCallback(), JsonLoggerCallback()]


NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"


def summarise(grid, payloads: list[TrialRecord], stopped_early: frozenset = frozenset()) -> Summary:
    """{trial id: error, result status, dev BLEU, reports, config, stopped_early} of a Tune run's trials."""
    out: Summary = {}
    names = {f"{p.row}-s{p.seed}": p.id for p in payloads}  # _trial_namer's: a worker killed before it reported
    for r in grid:
        m, index = r.metrics or {}, (r.config or {}).get("trial_index")
        name = Path(r.path).name if r.path else ""
        key = m.get("tsweep_trial") or (payloads[index].id if index is not None else names.get(name, name))
        out[key] = {
            "error": one_line(r.error) if r.error else None,
            "status": m.get("status"),
            "dev_bleu": m.get("dev_bleu"),
            "reports": m.get("training_iteration"),
            "config": r.config,
        }
        if key in stopped_early and not m.get("status"):  # no result because the scheduler ended it
            out[key]["stopped_early"] = True
        for other in str(m.get("tsweep_seeds") or "").split(",")[1:]:  # seeds: N: its other seeds ended with it
            out.setdefault(other, {**out[key], "status": None})
    return out


def one_line(error) -> str:
    """What went wrong in a trial, in one line: the innermost error, not Ray's wrapper around it; a worker Ray's
    memory monitor killed as "killed: out of memory at N GB"."""
    cause = root_cause(error) if isinstance(error, BaseException) else error
    killed = out_of_memory(str(error)) or out_of_memory(str(cause))
    if killed:
        return killed
    first = _ANSI.sub("", next((x for x in str(cause).splitlines() if x.strip()), ""))
    name = type(cause).__name__ if isinstance(cause, BaseException) else ""
    return f"{name}: {first}".strip(": ") or name or "error without a message"


class FaultLog:
    """A trial's worker that failed (an error, Ray's memory monitor killing it), said in one line as it happens
    and kept in the trial's faults.jsonl, which sweeps/run/trial.py copies into result.json (``faults``) when the
    retried trial ends; Tune retries it from its checkpoint in a fresh worker (FailureConfig max_failures)."""

    def __init__(self, sweep_dir: Optional[Path], payloads: list[TrialRecord], say: Echo):
        self.sweep_dir, self.payloads, self.say = sweep_dir, payloads, say

    def trial_id(self, trial) -> str:
        index = (trial.config or {}).get("trial_index")
        if isinstance(index, int) and 0 <= index < len(self.payloads):
            return self.payloads[index].id
        return (trial.last_result or {}).get("tsweep_trial") or str(trial.trial_id)

    @staticmethod
    def reason(trial) -> str:
        """The newest failure in Tune's error file of the trial, in one line."""
        text = ""
        try:
            path = trial.error_file
            text = Path(path).read_text(errors="replace") if path else ""
        except (OSError, AttributeError, TypeError):
            pass
        last = text.rsplit("Failure #", 1)[-1].split("\n", 1)[-1] if "Failure #" in text else text
        return one_line(last.strip() or "the worker ended without saying why")

    def record(self, trial, retried: bool) -> None:
        tid, reason = self.trial_id(trial), self.reason(trial)
        failures = getattr(getattr(trial, "run_metadata", None), "num_failures", None)
        then = "retried from its checkpoint in a fresh worker" if retried else "not retried again: failed"
        from analysis.data.text import printable  # names from disk: no terminal escapes reach the user

        self.say(f"{printable(tid)}: {printable(reason)}; {then}" + (f" (failure {failures})" if failures else ""))
        if self.sweep_dir is None or not SAFE_NAME.match(tid):
            return
        try:
            (self.sweep_dir / "trials" / tid).mkdir(parents=True, exist_ok=True)  # killed before it made it
            with open(self.sweep_dir / "trials" / tid / FAULTS, "a") as f:
                f.write(json.dumps({"time": time.time(), "reason": reason, "retried": retried}) + "\n")
        except OSError:  # the trial never made its directory: the line above is the record
            pass


def echo_callback(echo: Optional[Echo], total: int, sync: Callable[[], object] = lambda: 0,
                  faults: Optional[FaultLog] = None) -> Callback:  # fmt: skip
    """One line per trial that ends, beside Tune's own status table; a failed worker's line (FaultLog); the
    driver's signals reach Tune here."""
    from ray.tune import Callback

    class Echo(Callback):
        ended = 0

        def on_step_begin(self, iteration, trials, **info):
            INTERRUPTS.stop_tune()  # a SIGINT or SIGTERM came: Tune's graceful stop, from its own loop

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

        def on_trial_recover(self, iteration, trials, trial, **info):
            if faults is not None:
                faults.record(trial, retried=True)

        def on_trial_error(self, iteration, trials, trial, **info):
            if faults is not None:
                faults.record(trial, retried=False)

    return Echo()
