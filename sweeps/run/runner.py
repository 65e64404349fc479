"""Ray Tune runs a sweep: a fresh local Ray bound to 127.0.0.1 by default, an existing cluster with an address.

The sweep's life (what Tune sees of one round is tune_adapter.py).  A sweep is three calls (``run_sweep``
makes them; adaptive rounds call ``run_trials`` more than once):

    ctx = open_sweep(spec, "cpu", out)    # validate, lock, sweep.json, MLflow parent run, Ray
    run_trials(ctx, trials)               # one Tune run over exactly these trials; done ones cost nothing
    close_sweep(ctx, "FINISHED")          # open child runs ended, summary, parent run ended, unlocked

Each trial is ``trial.run_trial`` in a Ray worker; its workdir lies in the sweep directory (or is pushed to
the sweep's URI, see storage.py), so a retried trial (Ray FailureConfig) resumes from its own checkpoint.
A resumed sweep starts a fresh Tune run and reads nothing pickled from the sweep location: a grid re-plans
from sweep.json and dispatches only the trials without a finished or diverged result; a search re-opens its
Optuna study in optuna.db and enqueues the trials without a result again (search_state.py).

A round that ends before each of its trials has a result (finished or diverged), an error, or a scheduler's
stop is interrupted, whatever Tune says of it: SIGINT, SIGTERM (interrupts.py), a result lost on the way.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, cast

from analysis.data.sweep_record import write_record
from sweeps.spec.profiles import get_profile, scale_warning
from sweeps.spec.sweep_spec import Spec, Trial
from sweeps.state.diskfull import no_space, no_space_message
from sweeps.state.lock import SweepLock
from sweeps.state.records import RoundRecord, Summary, SummaryEntry, TrialResult
from sweeps.state.search_state import SearchPlan, plan_search, planned_total, search_trials, seed_trials
from sweeps.state.storage import Storage
from sweeps.state.sweep_state import LOCK_NAME, check_seeds, check_state, locate, read_state, seed_record
from transformer_core.errors import UserError
from transformer_core.rundir import RESULT, TrialRecord, done_result, finished_result, loads, write_json

from .interrupts import INTERRUPTS
from .tracking import (
    artifact_root,
    check_reachable,
    default_uri,
    describe_parent,
    end_open_runs,
    end_run,
    ensure_parent_run,
    git_commit,
    resolve_uri,
    stored_uri,
    sweep_store_uri,
)
from .trial import trial_workdir
from .tune_adapter import Echo, TuningContext, fit_round
from .warm_start import start_from_earlier
from .worker_memory import env_worker_bound

log = logging.getLogger(__name__)
TUNE_NAME = "tune"
_ADDRESS = re.compile(r"^(auto|(ray://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5})$")
_END_STATE = {"FINISHED": "finished", "KILLED": "interrupted", "FAILED": "failed"}


class BudgetSpent(Exception):
    """The wall-clock budget ran out during a Tune run: ``finished`` of ``total`` trials have a result."""

    def __init__(self, finished: int, total: int):
        super().__init__(f"budget spent: {finished} of {total} trials finished")
        self.finished, self.total = finished, total


def as_interrupted(ctx: SweepContext, exc: BaseException) -> SweepInterrupted:
    """``exc`` as a SweepInterrupted: itself, or for a KeyboardInterrupt (a second signal outside a Tune run)
    the trials finished so far and the signal that stopped the sweep."""
    if isinstance(exc, SweepInterrupted):
        return exc
    return SweepInterrupted(*ctx.finished_count(), signum=getattr(exc, "signum", INTERRUPTS.signum))


class SweepInterrupted(Exception):
    """A round ended before every trial had a result: ``finished`` of ``total`` trials have one; ``signum`` is
    the signal that stopped it (None: trials ended without a result, ``missing`` of them)."""

    def __init__(self, finished: int, total: int, signum: Optional[int] = None, missing: int = 0):
        super().__init__(f"interrupted: {finished} of {total} trials finished")
        self.finished, self.total, self.signum, self.missing = finished, total, signum, missing


@dataclass
class SweepContext:
    """An open sweep: what ``run_trials`` and ``close_sweep`` need, and sweep.json's state.

    ``location`` is the sweep as the user named it (a resolved local path or a URI); ``sweep_dir`` is
    where this driver writes (the same path, or a scratch copy pushed to the URI by ``sync``).
    ``tracking`` {uri, experiment_id, parent_run_id} goes to every trial; ``summary`` collects
    {trial_id: final state} over all rounds (tune_summary.json)."""

    spec: Spec
    profile_name: str
    location: str
    sweep_dir: Path
    store: Optional[Storage]
    lock: SweepLock
    state: dict
    tracking: dict
    address: Optional[str] = None
    resume: bool = False
    summary: Summary = field(default_factory=dict)
    verbose: bool = False  # Ray Tune's own status tables instead of the live view
    # this run's start (a --resume is a run of its own): the live view's elapsed time counts from it
    started: float = field(default_factory=time.time)
    total: Optional[int] = None  # a search's whole plan (search and confirmation): the live view counts against it
    # the planned trials with their RunConfigs, by id: those this run adds as planned, those an earlier run of the
    # sweep planned built once from sweep.json when first needed
    trials: dict[str, Trial] = field(default_factory=dict, repr=False)

    @property
    def preset(self) -> str:
        return self.spec.base.get("preset", "base")

    def planned(self) -> list[Trial]:
        """The trials of sweep.json's plan, in plan order."""
        rules, plan = self.state["profile_rules"], self.state["plan"]
        for tid in self.state["trials"]:
            if tid not in self.trials:
                self.trials[tid] = Trial.from_record(TrialRecord.from_json(plan[tid], tid), rules)
        return [self.trials[tid] for tid in self.state["trials"]]

    def add_trials(self, trials: list[Trial]) -> list[Trial]:
        """Append trials to sweep.json's plan (written atomically); returns those that were new."""
        new = [t for t in trials if t.trial_id not in self.state["plan"]]
        for t in new:
            trial_workdir(self.sweep_dir, t.trial_id)
            self.state["plan"][t.trial_id] = t.record().plan_entry()
            self.state["trials"].append(t.trial_id)
            self.trials[t.trial_id] = t
        if new:
            self.write_state()
        return new

    def tuning(self) -> TuningContext:
        """What a round's Tune run takes of this sweep (tune_adapter.fit_round)."""
        return TuningContext(self.spec, self.profile_name, self.location, self.sweep_dir, self.store, self.verbose,
                             tuple(self.state["rounds"]), self.payload, self.start_round, self.sync, self.total,
                             self.started)  # fmt: skip

    def start_round(self, record: RoundRecord) -> None:
        """A round begins: sweep.json's rounds say so (written at once)."""
        self.state["rounds"].append(record)
        self.write_state()

    def write_state(self) -> None:
        self.state["updated"] = time.time()
        write_record(self.sweep_dir, self.state)  # the one writer of sweep.json (analysis.data.sweep_record)
        self.sync()

    def sync(self) -> None:
        """Push the driver's small files to the sweep's URI (nothing to do for a local path)."""
        if self.store:
            self.store.push(self.sweep_dir, "", top_level_only=True)

    def payload(self, t: Trial) -> TrialRecord:
        return t.record(self.location, self.tracking, self.preset)

    def result(self, trial_id: str, config_hash: str) -> Optional[TrialResult]:
        """The trial's result if it finished or diverged (for this config), else None."""
        if not self.store:
            return cast(Optional[TrialResult], finished_result(trial_workdir(self.sweep_dir, trial_id), config_hash))
        rel = f"trials/{trial_id}/{RESULT}"
        try:
            done = done_result(loads(self.store.read_text(rel)), config_hash) if self.store.exists(rel) else None
            return cast(Optional[TrialResult], done)
        except (OSError, ValueError):
            return None

    def done_results(self) -> tuple[list[TrialResult], int]:
        """(the finished or diverged results of the sweep's own trials, trials planned); a search's are every seed of
        its samples and the confirmation round's trials (in the plan), against its whole plan (planned_total)."""
        if self.spec.search:
            trials = seed_trials(self.spec, self.profile_name, self.sweep_dir) + self.planned()
        else:
            trials = self.planned()
        results = [r for r in (self.result(t.trial_id, t.config_hash) for t in trials) if r]
        return results, planned_total(self.spec) if self.spec.search else len(trials)

    def finished_count(self) -> tuple[int, int]:
        """(trials with a finished or diverged result, trials planned)."""
        results, planned = self.done_results()
        return len(results), planned


def check_address(address: Optional[str]) -> None:
    if address is not None and not _ADDRESS.match(address):
        raise UserError(f"--address {address!r} is invalid: allowed 'auto', HOST:PORT or ray://HOST:PORT")


def init_ray(address: Optional[str], num_cpus: Optional[int]) -> None:
    """Join the cluster at ``address`` under Ray's own auth, or start a local Ray that listens on 127.0.0.1 only."""
    if not address:
        # Before Ray is imported: with clusters "disabled", Ray takes 127.0.0.1 as this node's address, and
        # gcs_server, raylet, workers and agents then bind to it instead of every interface.  Nothing else can
        # reach this instance, so token auth is off for it (a token would also be written to ~/.ray).
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:  # a fresh local instance, even where another Ray runs on this machine (--address auto joins that one)
            ray.init(
                address="local",
                num_cpus=num_cpus or os.cpu_count(),
                _node_ip_address="127.0.0.1",
                dashboard_host="127.0.0.1",
                **kwargs,
            )
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        raise UserError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None
    INTERRUPTS.install()  # ray.init replaced the SIGTERM handler (its C++ one prints a stack dump and aborts)
    ip = ray.util.get_node_ip_address()
    if not address and not ip.startswith("127."):
        log.warning("local Ray listens on %s, not only 127.0.0.1 (Ray was imported before tsweep set it up)", ip)


def open_sweep(
    spec: Spec,
    profile_name: str,
    sweep_dir: str | Path,
    address: Optional[str] = None,
    resume: bool = False,
    num_cpus: Optional[int] = None,
) -> SweepContext:
    """Validate, lock the sweep, write sweep.json, open the MLflow parent run and start (or join) Ray.

    Nothing is written before the spec, the profile, --address and --out are found valid.  The plan of a
    new sweep is the spec's trials; a resumed sweep keeps its plan (trials added by earlier rounds too)."""
    check_address(address)
    env_worker_bound()  # TSWEEP_WORKER_MEMORY checked here, not by a worker after its first trial
    profile = get_profile(profile_name)
    trials = spec.trials(profile)
    store, location, local = locate(sweep_dir, address, spec.tracking.get("uri"))
    before = check_state(read_state(store, local, location), spec.name, profile_name, resume, location, profile.rules())
    check_seeds(before, spec.seeds, spec.adaptive, location)
    check_reachable(spec.tracking.get("uri") or (before or {}).get("uri") or "")  # not minutes of MLflow retries
    for t in trials:  # every workdir a plain name inside the sweep (the spec restricts row labels too)
        trial_workdir(local, t.trial_id)
    if store:
        store.check_writable()
    fresh = not store and not local.exists()
    lock = SweepLock.acquire(location, local, store)
    try:
        if store:
            if not store.exists("sweep.json"):  # a fresh location: scratch left from an earlier sweep there is stale
                shutil.rmtree(store.scratch, ignore_errors=True)
            store.pull("", local, keep=lambda r: "/" not in r and r != "sweep.lock", overwrite=False)
        state = check_state(
            read_state(store, local, location), spec.name, profile_name, resume, location, profile.rules()
        )
        local.mkdir(parents=True, exist_ok=True)
        ctx = SweepContext(spec, profile_name, location, local, store, lock, {}, {}, address, resume)
        ctx.summary = _read_summary(local)
        ctx.total = planned_total(spec) if spec.search else None
        _start_tracking(ctx, state)
        ctx.state = _initial_state(ctx, state, profile.rules())
        if not ctx.add_trials([] if spec.search else trials):
            ctx.write_state()
        init_ray(address, num_cpus)
    except BaseException:
        if not store and not (local / "sweep.json").exists():  # it never started: leave --out as it was
            _remove_partial(local, fresh)
        lock.release()
        raise
    return ctx


def _remove_partial(sweep_dir: Path, created: bool) -> None:
    """What a sweep that failed before writing sweep.json created (the lock, an MLflow store), so that
    running it again finds --out as the user left it."""
    for name in ("mlflow.db", "mlflow.db-journal", "tune_summary.json", "mlartifacts", LOCK_NAME):
        path = sweep_dir / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    if created:
        try:
            sweep_dir.rmdir()
        except OSError:
            pass


def _start_tracking(ctx: SweepContext, state: dict) -> None:
    spec, local = ctx.spec, ctx.sweep_dir
    open_store = resolve_uri if ctx.store else sweep_store_uri  # a local sweep's own store re-rooted at it
    uri = spec.tracking.get("uri") or (open_store(state["uri"], local) if state.get("uri") else default_uri(local))
    artifacts = f"{ctx.location}/mlartifacts" if ctx.store else artifact_root(local)
    try:
        exp_id, parent = ensure_parent_run(
            uri,
            spec.tracking.get("experiment", spec.name),
            spec.name,
            {"profile": ctx.profile_name, "spec": spec.source},
            state.get("parent_run_id"),
            artifact_location=artifacts,
        )
    except Exception as exc:  # a bad URI, an unreachable server, a full disk: one line, nothing run
        if no_space(exc):
            raise UserError(no_space_message(ctx.location, exc, resumable=bool(state))) from None
        raise UserError(f"cannot use MLflow tracking URI {uri!r}: {str(exc).splitlines()[0]}") from None
    ctx.tracking = {"uri": uri, "experiment_id": exp_id, "parent_run_id": parent}
    try:  # the parent run in MLflow's UI: what the sweep is, from which commit
        params = {"spec": spec.source, "profile": ctx.profile_name, "spec_name": spec.name,
                  "max_concurrent": spec.max_concurrent, "seeds": ",".join(str(s) for s in spec.seeds),
                  "corpus": spec.corpus.name}  # fmt: skip
        tags = {
            "commit": git_commit(Path(__file__).parent),
            "profile_rules": json.dumps(get_profile(ctx.profile_name).rules()),
            **parent_description(spec, ctx.profile_name),
        }
        describe_parent(uri, parent, params, tags)
    except Exception as exc:  # noqa: BLE001 - a description is not worth stopping a sweep for
        log.info("MLflow parent run not described: %s", exc)


def parent_description(spec: Spec, profile: str) -> dict[str, str]:
    """The parent run's description (``mlflow.note.content``, what MLflow's UI shows on the run's page: the spec's
    title and description, and a test profile's warning first) and its ``profile_purpose`` tag."""
    warning = scale_warning(profile)
    title = spec.title or spec.name
    text = "\n\n".join(x for x in (f"**{warning}**" if warning else "", f"# {title}", spec.description) if x)
    return {"mlflow.note.content": text, "profile_purpose": get_profile(profile).purpose}


def _initial_state(ctx: SweepContext, state: dict, rules: dict) -> dict:
    """sweep.json as this run starts: the earlier state's keys (an adaptive record, say) kept, ours updated."""
    spec, tr = ctx.spec, ctx.tracking
    return {
        **state,
        "name": spec.name,
        "spec": spec.source,
        "profile": ctx.profile_name,
        "profile_rules": rules,
        "uri": stored_uri(tr["uri"], ctx.sweep_dir),
        "experiment_id": tr["experiment_id"],
        "parent_run_id": tr["parent_run_id"],
        "created": state.get("created", time.time()),
        "status": "running",
        "metric": spec.metric,
        "mode": spec.mode,
        "seed_plan": seed_record(spec.seeds, spec.adaptive),  # a resume with other seeds is refused (check_seeds)
        "objectives": spec.search.objectives if spec.search else None,  # a search with two: the report's Pareto front
        "report": report_record(ctx, state),  # title, description, claims and paper rows the report shows
        "rounds": state.get("rounds", []),
        "trials": [tid for tid in state.get("trials", []) if "config_hash" in state["plan"].get(tid, {})],
        "plan": {tid: p for tid, p in state.get("plan", {}).items() if "config_hash" in p},
    }


def report_record(ctx: SweepContext, state: dict) -> dict:
    """sweep.json's "report" as this run starts: the spec's, with a note of every claim changed since the sweep
    first recorded its claims (stated after results could be seen: the report says so)."""
    now, before = ctx.spec.report_record(), state.get("report")
    amended = list(before.get("amended") or []) if isinstance(before, dict) else []
    if isinstance(before, dict) and isinstance(before.get("claims"), list):
        old = {c.get("id"): c for c in before["claims"] if isinstance(c, dict)}
        new = {c["id"]: c for c in now["claims"]}
        changed = sorted(k for k in new if old.get(k) != new[k])  # a claim removed is not judged: nothing to mark
        removed = sorted(k for k in old if k not in new and isinstance(k, str))
        if removed:
            print(f"claims removed since the sweep started ({', '.join(removed)}): the report no longer judges them",
                  flush=True)  # fmt: skip
        if changed:
            plan = state.get("plan") or {}
            finished = sum(bool(ctx.result(tid, p.get("config_hash", ""))) for tid, p in plan.items())
            amended.append({"at": time.time(), "claims": changed, "trials": finished})
            print(f"claims changed since the sweep started ({', '.join(changed)}): the report will say they were "
                  "stated after results could be seen", flush=True)  # fmt: skip
    return {**now, **({"amended": amended} if amended else {})}


def _read_summary(sweep_dir: Path) -> Summary:
    try:
        summary = loads((sweep_dir / "tune_summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def run_trials(ctx: SweepContext, trials: list[Trial], round_name: str = TUNE_NAME, echo: Echo = print,
               time_budget: Optional[float] = None) -> Summary:  # fmt: skip
    """One Ray Tune run over exactly ``trials`` (added to the plan); returns {trial_id: final state}.

    A trial whose result.json says finished or diverged is not dispatched.  For a search spec, ``trials``
    is the base trial and Tune samples what is left of ``search.samples`` (search_state.plan_search).  Raises
    SweepInterrupted when a signal or a lost result left a trial of the round without a result, BudgetSpent
    when ``time_budget`` seconds ran out first (running trials are stopped and keep their checkpoints),
    UserError when trials ran out of disk."""
    if INTERRUPTS.signum:  # a signal before this round began (Ray starting, between adaptive rounds)
        raise SweepInterrupted(*ctx.finished_count(), signum=INTERRUPTS.signum)
    spec = ctx.spec
    search = plan_search(spec, ctx.profile_name, ctx.sweep_dir, ctx.result, ctx.summary) if spec.search else None
    if not ctx.spec.search:
        ctx.add_trials(trials)
    summary: Summary = {}
    todo: list[Trial] = []
    for t in trials if not ctx.spec.search else []:
        done = ctx.result(t.trial_id, t.config_hash)
        if done:
            summary[t.trial_id] = {"error": None, "status": done["status"], "dev_bleu": done.get("dev_bleu")}
        else:
            todo.append(t)
    already = summary or (search.done if search else {})
    if already:
        echo(f"{len(already)} of {len(trials) if not search else ctx.spec.searched().samples} trials "
             "already have a result: not run again")  # fmt: skip
    cut = out_of_time = False
    if todo or (search and search.samples):
        started = time.time()
        try:
            summary.update(fit_round(ctx.tuning(), trials if search else todo, round_name, echo, time_budget, search))
        except KeyboardInterrupt:  # a second signal: stopped at once
            cut = True
        # Tune's time budget ends the trials it has started as TERMINATED, not unfinished: what decides is
        # whether a trial of this round still has no result once the budget is spent
        spent = time_budget is not None and time.time() - started >= time_budget
        out_of_time = spent and any(not ctx.result(t.trial_id, t.config_hash) for t in todo)
    ctx.summary.update(summary)
    write_json(ctx.sweep_dir / "tune_summary.json", ctx.summary)
    ctx.sync()
    if out_of_time and not INTERRUPTS.signum:
        raise BudgetSpent(*ctx.finished_count())
    # after a signal an error does not end a trial (Ctrl-C reaches the trials' workers too): it is trained again
    missing = _without_result(ctx, todo, summary, search, errors_end=not (INTERRUPTS.signum or cut))
    if missing:  # a signal after every trial had its result interrupts nothing (the next round is not started)
        raise SweepInterrupted(*ctx.finished_count(), signum=INTERRUPTS.signum, missing=missing)
    full = [tid for tid, s in summary.items() if s.get("error") and no_space(Exception(s["error"]))]
    if full:
        raise UserError(no_space_message(ctx.location, OSError(28, "No space left on device")))
    return summary


def _ended(ctx: SweepContext, trial: Trial, entry: Optional[SummaryEntry], errors_end: bool = True) -> bool:
    """Whether a trial of a round ended: a finished or diverged result, the scheduler's stop, or an error."""
    entry = entry or {}
    done = ctx.result(trial.trial_id, trial.config_hash) or entry.get("stopped_early")
    return bool(done or (errors_end and entry.get("error")))


def _without_result(ctx: SweepContext, todo: list[Trial], summary: Summary, search: Optional[SearchPlan],
                    errors_end: bool = True) -> int:  # fmt: skip
    """How many trials of the round ended without a result, a scheduler's stop or (``errors_end``) an error;
    Tune may call them terminated all the same: a worker stopped by a signal, a result.json lost."""
    if search is None:
        return sum(1 for t in todo if not _ended(ctx, t, summary.get(t.trial_id), errors_end))
    sampled = search_trials(ctx.spec, ctx.profile_name, ctx.sweep_dir)
    ended = {tid for tid, t in sampled.items() if _ended(ctx, t, ctx.summary.get(tid), errors_end)}
    errors = sum(1 for tid, e in summary.items() if errors_end and e.get("error") and tid not in sampled)
    return max(0, ctx.spec.searched().samples - len(ended) - errors)  # errors: trials that never reported


def close_sweep(ctx: SweepContext, status: str) -> None:
    """End the sweep as ``status`` (FINISHED, KILLED or FAILED): child runs still RUNNING are ended (KILLED),
    tune_summary.json and sweep.json are written, the parent run is ended, the lock released.

    Every step is tried (a signal meanwhile does not cut it short); the first error is raised after the lock
    is released, the others are logged."""
    INTERRUPTS.closing = True
    errors = []
    tag = {"FINISHED": "stopped_early", "KILLED": "interrupted"}.get(status, "sweep_failed")
    steps = (
        lambda: _describe_end(ctx),
        lambda: end_open_runs(ctx.tracking["uri"], _child_run_ids(ctx), "KILLED", tag),
        lambda: write_json(ctx.sweep_dir / "tune_summary.json", ctx.summary),
        lambda: ctx.state.update(status=_END_STATE.get(status, status.lower())),
        ctx.write_state,
        lambda: end_run(ctx.tracking["uri"], ctx.tracking["parent_run_id"], status),
        ctx.sync,
    )
    for step in steps:
        try:
            step()
        except Exception as exc:  # noqa: PERF203 - each step on its own
            log.info("closing sweep %s: %s", ctx.location, str(exc).splitlines()[0] if str(exc) else exc)
            errors.append(exc)
    ctx.lock.release()
    INTERRUPTS.closing = False
    if errors:
        raise errors[0]


def _describe_end(ctx: SweepContext) -> None:
    """The parent run's metrics as the sweep closes: trials planned and finished, device-hours so far (a failure
    to write them is logged, not raised: the sweep's own state matters more)."""
    try:
        _parent_metrics(ctx)
    except Exception as exc:  # noqa: BLE001
        log.info("MLflow parent run's metrics not written: %s", exc)


def _parent_metrics(ctx: SweepContext) -> None:
    if not ctx.tracking:
        return
    results, planned = ctx.done_results()  # the sweep's own trials only, as the report counts them
    seconds = sum(r["wall_seconds"] for r in results if isinstance(r.get("wall_seconds"), (int, float)))
    metrics = {
        "trials_planned": planned,
        "trials_finished": sum(r.get("status") == "finished" for r in results),
        "device_hours": seconds / 3600,
    }
    describe_parent(ctx.tracking["uri"], ctx.tracking["parent_run_id"], {}, {}, metrics)


def _child_run_ids(ctx: SweepContext) -> list[str]:
    """MLflow child runs the trials recorded (``mlflow_run_id`` in each workdir)."""
    view = ctx.store.view() if ctx.store else ctx.sweep_dir
    return [m.read_text().strip() for m in sorted((view / "trials").glob("*/mlflow_run_id"))]


def fit_to_memory(ctx: SweepContext, echo: Callable[[str], None], address: Optional[str] = None) -> Spec:
    """The spec with max_concurrent lowered to what this machine's memory holds (worker_memory.fit_concurrency),
    said in one line where it was lowered.  A cluster's (``--address``) is not checked: which machines its trials
    land on is Ray's choice, made after the sweep starts; each worker still bounds itself (worker_memory.py)."""
    from .worker_memory import fit_concurrency, measured_peaks

    if address:
        if ctx.spec.max_concurrent > 1:
            echo("memory: trials at once not checked against the cluster's machines (Ray places them after the "
                 "sweep starts); each reused worker is replaced past its own machine's bound")  # fmt: skip
        return ctx.spec

    trials = ctx.spec.trials(get_profile(ctx.profile_name))
    n, why = fit_concurrency(trials, ctx.spec.max_concurrent, measured_peaks(ctx.sweep_dir))
    if why is None:
        return ctx.spec
    echo(why)
    return dataclasses.replace(ctx.spec, max_concurrent=n)


def why(exc: BaseException) -> str:
    """An error that stopped a sweep, in one line for sweep.json."""
    from .tune_adapter import one_line

    return one_line(exc)[:500]


def run_sweep(
    spec: Spec,
    profile_name: str,
    sweep_dir: str | Path,
    address: Optional[str] = None,
    resume: bool = False,
    num_cpus: Optional[int] = None,
    echo: Callable[[str], None] = print,
    verbose: bool = False,
) -> Summary:
    """Run (or resume) a sweep; returns {trial_id: final state}.  Raises SweepInterrupted when it was stopped
    (a signal) or a trial ended without a result."""
    ctx = open_sweep(spec, profile_name, sweep_dir, address, resume, num_cpus)
    ctx.verbose = verbose
    ctx.spec = fit_to_memory(ctx, echo, address)  # as many trials at once as the machine's memory holds
    try:
        if spec.search:  # search.warm_start: the study starts from an earlier search's finished trials
            start_from_earlier(spec, ctx.sweep_dir, echo)
        run_trials(ctx, (ctx.planned() if not spec.search else []) or spec.trials(get_profile(profile_name)), echo=echo)
        if spec.search:  # search.confirm: the best configurations again, with fresh seeds
            from .confirm import run_confirmation  # the search report's statistics: imported only for a search
            from .search_record import record_search

            run_confirmation(ctx, run_trials, echo)
            record_search(ctx.sweep_dir, ctx.state, ctx.tracking, echo)  # the study's and the parent run's record
    except SweepInterrupted:
        close_sweep(ctx, "KILLED")
        raise
    except KeyboardInterrupt as exc:  # a second signal outside a Tune run
        close_sweep(ctx, "KILLED")
        raise as_interrupted(ctx, exc) from None
    except BaseException as exc:
        ctx.state["error"] = why(exc)  # sweep.json says why the sweep stopped
        try:
            close_sweep(ctx, "FAILED")
        except Exception as exc:  # the first error is the one to show
            log.info("sweep %s not closed cleanly: %s", ctx.location, exc)
        raise
    close_sweep(ctx, "FINISHED")
    return ctx.summary
