"""`tsweep evaluate` over a sweep: every finished trial scored on a named set, one Ray task per trial.

The work of one trial is ``transformer_core.inference.evaluate_run`` (no Ray; the ``--run`` form calls it
directly); this module picks the trials, reads the set once in the driver (so a cluster's workers need
no copy of the files), skips trials already scored on it, and fans the rest out over a local Ray (the
one ``tsweep run`` starts) or the cluster at ``address``, with a progress bar.  Each trial's scores go
to its MLflow child run as metrics ``NAME_bleu``, ``NAME_chrf``, ``NAME_ppl``, ``NAME_unknown_chars``,
tags with the signatures and the set's fingerprint, and artifacts under ``evals/``.

A sweep stored at a URI (storage.py) is read from its pulled view (no checkpoints), as ``tsweep report``
reads it.  Each task pulls what its trial's evaluation needs (config.json, result.json and the averaged
checkpoints) from the URI into a scratch directory of its own node, pushes ``evals/NAME.{hyp,json}`` back
(the .json last: its presence says the set is done) and deletes its scratch.  The task records its MLflow
calls and the driver replays them on the trial's child run; where that run lives in the sweep's own
``mlflow.db``, the driver holds the sweep's lock meanwhile (a running ``tsweep run`` owns that file) and
pushes the file back at the end.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import pandas as pd

from analysis.data.collect import collect
from analysis.data.metrics import for_task, sweep_task
from analysis.data.sweep_record import SweepState, require_record
from sweeps.state.lock import SweepLock
from sweeps.state.storage import Storage, open_storage
from sweeps.state.sweep_state import check_inside, read_sweep_state
from transformer_core.data import get_recipe
from transformer_core.data.eval_set import EvalSet, EvalSetError, read_eval_set
from transformer_core.data.prepare import parse_corpus_name
from transformer_core.errors import UserError
from transformer_core.finished import done_evaluation, eval_paths, read_run
from transformer_core.rundir import CHECKPOINTS, CONFIG, EVALS, RESULT, TRACKING, Status, checkpoint_name, loads
from transformer_core.tracking import JsonTracker

from .runner import check_address, init_ray
from .tracking import DEFAULT_DB, MlflowTracker, mlflow_client, resolve_uri, retry_locked, sweep_store_uri
from .trial import trial_workdir

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run_id"  # written by tracking.MlflowTracker in a trial's directory


class ChildRunTracker(MlflowTracker):
    """A trial's existing MLflow child run, left in its state: evaluation metrics, tags (replaceable, unlike
    params: a set scored again replaces its signature) and artifacts under evals/."""

    def __init__(self, uri: str, run_id: str):  # attach only: never create a run or set it RUNNING
        self.client, self.run_id = mlflow_client(uri), run_id

    def log_params(self, params: dict) -> None:
        for key, value in params.items():
            retry_locked(self.client.set_tag, self.run_id, key, str(value)[:5000])

    def log_artifact(self, path: str) -> None:
        if Path(path).exists():
            retry_locked(self.client.log_artifact, self.run_id, path, EVALS)


class RecordingTracker:
    """The tracker of a task at a URI: its calls kept, for the driver to replay on the trial's MLflow run."""

    def __init__(self):
        self.calls: list[tuple[str, tuple]] = []

    def log_params(self, params: dict) -> None:
        self.calls.append(("log_params", (params,)))

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.calls.append(("log_metrics", (metrics, step)))

    def log_artifact(self, path: str) -> None:
        self.calls.append(("log_artifact", (Path(path).name,)))  # a file of evals/, replayed from the view

    def set_status(self, status: str, reason: str = "") -> None:
        self.calls.append(("set_status", (status, reason)))


def trial_tracker(workdir: Path, tracking_uri: Optional[str] = None):
    """Where a run's evaluation is reported: its MLflow child run (a sweep's trial) or its tracking.jsonl."""
    workdir = Path(workdir)
    marker = workdir / RUN_ID_FILE
    if tracking_uri is None and marker.exists():  # a trial given as --run: its sweep is two levels up
        sweep = workdir.parent.parent
        try:
            stored = require_record(sweep).tracking.uri
            tracking_uri = sweep_store_uri(stored, sweep) if stored else None
        except (UserError, TypeError):  # no readable record of its sweep: the run's own tracking.jsonl
            tracking_uri = None
    if tracking_uri and marker.exists():
        return ChildRunTracker(tracking_uri, marker.read_text().strip())
    return JsonTracker(workdir / TRACKING)


def check_langs(es: EvalSet, corpus: str, direction: Optional[str]) -> None:
    """A recipe's set must be in the language pair the run translates (a files: set is taken as given)."""
    name, _ = parse_corpus_name(corpus)
    if es.langs is None or name == "files":
        return
    want = tuple(direction.split("-")) if direction else get_recipe(name.split("+")[0]).langs
    if tuple(es.langs) != want:
        raise EvalSetError(
            f"--corpus {es.origin!r} is {'-'.join(es.langs)} but the model translates {'-'.join(want)}: "
            "give a set in the model's language pair"
        )


def evaluation_set(spec: str, name: Optional[str], workdir: Path, data_dir=None) -> EvalSet:
    """The set, read (and checked against the run's language pair) before anything is written."""
    config, _ = read_run(workdir)
    es = read_eval_set(spec, name, config.data.direction, data_dir)
    check_langs(es, config.data.corpus, config.data.direction)
    return es


def check_writes(root: Path, workdir, name: str) -> None:
    """Refuse, in one line, a run whose evaluation on set ``name`` would write outside ``root`` (the sweep
    directory, or the run directory itself): its evals/NAME.{json,hyp} and tracking.jsonl, symlinks followed."""
    workdir = check_inside(root, workdir)
    for path in (workdir / EVALS, *eval_paths(workdir, name), workdir / TRACKING):
        check_inside(root, path)


def check_sweep_writes(sweep_dir: Path, state: SweepState, todo: list, name: str) -> None:
    """Everything evaluating ``todo`` ((trial id, workdir) pairs) writes in a local sweep: each trial's files
    and the sweep's own MLflow store, resolved inside the sweep directory before anything is written."""
    if state.tracking.uri == DEFAULT_DB:
        for path in (sweep_dir / DEFAULT_DB, sweep_dir / "mlartifacts"):
            check_inside(sweep_dir, path)
    for tid, wd in todo:
        check_writes(sweep_dir, trial_workdir(sweep_dir, tid), name)


def finished_trials(
    sweep_dir: Path, rows: Optional[list[str]], where: Optional[str] = None, flag: str = "--rows"
) -> pd.DataFrame:
    """The finished trials (of ``rows``) of the local sweep directory (or pulled view) ``sweep_dir``, refused in
    one line when there are none; messages name the sweep as ``where`` (default ``sweep_dir``) and the rows as
    given with ``flag`` (evaluate's --rows, translate's --row)."""
    where = where or str(sweep_dir)
    read_sweep_state(sweep_dir)  # a missing or unreadable sweep.json: one line
    trials = Path(sweep_dir) / "trials"
    for path in sorted(trials.iterdir()) if trials.is_dir() else ():
        # evaluate writes into trial directories: one linked out of the sweep is refused, not just left out (collect
        # leaves it out of what it reads)
        check_inside(sweep_dir, path)
    df = collect(sweep_dir)
    if rows:
        unknown = [r for r in rows if r not in set(df["row"])]
        if unknown:
            allowed = ", ".join(dict.fromkeys(df["row"]))
            raise UserError(f"{flag} {','.join(unknown)}: not in sweep {where!r}; allowed {allowed}")
        df = df[df["row"].isin(rows)]
    fin = df[df["status"] == Status.FINISHED.value]
    if not for_task(sweep_task(fin)).evaluation_sets:
        raise UserError(f"sweep {where!r} is a language-model sweep (task lm): it does not translate; "
                        "its dev and test perplexity and bits per byte are in the report")  # fmt: skip
    if fin.empty:
        states = "; ".join(f"{n} {s}" for s, n in sorted(df["status"].value_counts().items())) or "no trials"
        raise UserError(f"sweep {where!r} has no finished trial ({states}): nothing to evaluate")
    return fin


def stored_view(store: Storage) -> Path:
    """The pulled view of the sweep at ``store`` (no checkpoints), after checking that a sweep is there."""
    try:
        found = store.exists("sweep.json")
    except Exception as exc:  # an unreachable endpoint, a bucket that does not exist, no permission
        raise UserError(f"cannot read sweep location {store.uri!r}: {str(exc).splitlines()[0]}") from None
    if not found:
        raise UserError(f"{store.uri!r} is not a sweep directory (no sweep.json): give the --out of 'tsweep run'")
    read_sweep_state(store.uri)  # an unreadable sweep.json: one line naming the URI
    return store.view()


def _failure(exc: Exception) -> dict:
    if isinstance(exc, UserError):
        return {"status": "failed", "error": str(exc)}
    first = str(exc).splitlines()[0] if str(exc) else ""
    return {"status": "failed", "error": f"{type(exc).__name__}: {first}"}


def _evaluate_trial(es: EvalSet, workdir: str, tracking_uri: Optional[str], device: str, data_dir, threads: int):
    """One Ray task: a trial scored on the set; a failure comes back as a record, never as an exception."""
    import torch

    from transformer_core.inference import evaluate_run  # torch: in the worker, not the driver

    torch.set_num_threads(max(1, threads))  # the run's own threads setting, where it has one, wins
    try:
        return evaluate_run(workdir, es, trial_tracker(Path(workdir), tracking_uri), device, data_dir)
    except Exception as exc:  # one trial's broken checkpoint must not lose the other trials' results
        return _failure(exc)


def _evaluate_stored(es: EvalSet, uri: str, trial_id: str, steps: list, device: str, data_dir, threads: int):
    """One Ray task for a sweep at a URI: the trial pulled into this node's scratch, scored, its evals pushed.

    Returns the record with ``calls``, the tracker calls for the driver to replay."""
    import torch

    from transformer_core.inference import evaluate_run

    torch.set_num_threads(max(1, threads))
    store, remote = Storage(uri), f"trials/{trial_id}"
    need = {CONFIG, RESULT, *(f"{CHECKPOINTS}/{checkpoint_name(s)}" for s in steps)}
    tracker = RecordingTracker()
    work = None
    try:
        (store.scratch / "evaluate").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{trial_id}.", dir=store.scratch / "evaluate"))
        store.pull(remote, work, keep=lambda r: r in need)
        record = evaluate_run(work, es, tracker, device, data_dir)
        json_path, hyp_path = eval_paths(work, es.name)
        for path in (hyp_path, json_path):  # the .json last: its presence says the set is done
            store.put(path, f"{remote}/{EVALS}/{path.name}")
        return {**record, "calls": tracker.calls}
    except Exception as exc:
        failed = _failure(exc)  # named as the user knows the trial, not by this task's scratch
        return {**failed, "error": failed["error"].replace(str(work), f"{uri}/{remote}") if work else failed["error"]}
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)  # everything is at the URI now; scratch is not an archive


def evaluate_sweep(
    sweep_dir,
    spec: str,
    name: Optional[str] = None,
    rows: Optional[list[str]] = None,
    address: Optional[str] = None,
    num_cpus: Optional[int] = None,
    device: str = "auto",
    data_dir=None,
    cpus_per_task: int = 1,
    gpus_per_task: Optional[float] = None,
    progress: bool = True,
) -> tuple[EvalSet, pd.DataFrame]:
    """Score every finished trial (of ``rows``) of the sweep at ``sweep_dir`` (a local path or a URI) on
    ``spec``; returns the set and one line per trial.  Nothing is written before the sweep, its trials and the
    set are found usable."""
    check_address(address)
    store = open_storage(str(sweep_dir))
    local = stored_view(store) if store else Path(sweep_dir)
    fin = finished_trials(local, rows, str(sweep_dir))
    fan = dict(address=address, num_cpus=num_cpus, cpus=cpus_per_task, gpus=gpus_per_task, progress=progress)
    es = evaluation_set(spec, name, Path(fin["workdir"].iloc[0]), data_dir)
    state = read_sweep_state(local)
    if store:
        return es, _evaluate_sweep(store, local, fin, es, state, device, data_dir, cpus_per_task, fan)
    lock = _lock_local(local, str(sweep_dir))  # one driver at a time: a second evaluate would score the trials again
    try:
        return es, _evaluate_sweep(None, local, fin, es, state, device, data_dir, cpus_per_task, fan)
    finally:
        lock.release()


def _lock_local(local: Path, where: str) -> SweepLock:
    try:
        return SweepLock.acquire(where, local)
    except UserError as exc:
        raise UserError(f"{exc}: one `tsweep run` or `tsweep evaluate` at a time on a sweep; evaluate when it "
                        "ends") from None  # fmt: skip


def _evaluate_sweep(store, local: Path, fin: pd.DataFrame, es: EvalSet, state: SweepState, device, data_dir,
                    cpus_per_task: int, fan: dict) -> pd.DataFrame:  # fmt: skip
    """The evaluate_sweep's table, once the sweep and the set are found usable (and a local sweep locked)."""
    found = {tid: done_evaluation(wd, es) for tid, wd in zip(fin["trial_id"], fin["workdir"])}
    records: dict[str, dict] = {tid: {**r, "status": "skipped"} for tid, r in found.items() if r}
    todo = [(tid, wd) for tid, wd in zip(fin["trial_id"], fin["workdir"]) if tid not in records]
    if todo and store:
        records.update(_evaluate_at_uri(store, local, state, todo, es, device, data_dir, fan))
    elif todo:
        check_sweep_writes(local, state, todo, es.name)
        uri = sweep_store_uri(state.tracking.uri, local) if state.tracking.uri else None
        jobs = [(tid, (str(wd), uri, device, data_dir, cpus_per_task)) for tid, wd in todo]
        records.update(_fan_out(_evaluate_trial, jobs, es, **fan))
    lines = []
    for _, t in fin.iterrows():
        r = records[t["trial_id"]]
        lines.append({"trial_id": t["trial_id"], "row": t["row"], "seed": t["seed"], **r})
    return pd.DataFrame(lines)


def _evaluate_at_uri(store: Storage, view: Path, state: SweepState, todo, es: EvalSet, device, data_dir, fan) -> dict:
    """The trials ``todo`` of the sweep at ``store`` scored by tasks that pull and push them (_evaluate_stored);
    each result copied into the view and its MLflow calls replayed as it arrives."""
    own_db = state.tracking.uri == DEFAULT_DB  # the sweep's own SQLite file: this driver writes it, then pushes it
    tracking_uri = resolve_uri(state.tracking.uri, view) if state.tracking.uri else None
    jobs, unreadable = [], {}
    for tid, wd in todo:
        try:
            steps = loads((Path(wd) / RESULT).read_text(encoding="utf-8")).get("averaged_checkpoints")
        except (OSError, ValueError, AttributeError):
            steps = None
        if not isinstance(steps, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in steps):
            unreadable[tid] = {"status": "failed", "error": f"{RESULT} names no averaged checkpoints (a list of steps)"}
            continue
        jobs.append((tid, (store.uri, tid, steps, device, data_dir, fan["cpus"])))
    if not jobs:
        return unreadable
    logged = []

    def replay(tid: str, record: dict) -> dict:
        calls = record.pop("calls", [])
        if record.get("status") != "evaluated":
            return record
        workdir = view / "trials" / tid
        try:
            for path in eval_paths(workdir, es.name)[::-1]:  # the view as the URI now is (the report reads it)
                path.parent.mkdir(exist_ok=True)
                path.write_text(store.read_text(f"trials/{tid}/{EVALS}/{path.name}"), encoding="utf-8")
            if tracking_uri and (workdir / RUN_ID_FILE).exists():
                tracker = ChildRunTracker(tracking_uri, (workdir / RUN_ID_FILE).read_text().strip())
                for method, args in calls:
                    getattr(tracker, method)(*((str(workdir / EVALS / args[0]),) if method == "log_artifact" else args))
                logged.append(tid)
        except Exception as exc:  # the scores are at the URI; only their MLflow copy is missing
            log.warning("%s: scored on %s, but not logged to MLflow: %s", tid, es.name, str(exc).splitlines()[0])
        return record

    lock = None
    if own_db:  # a running `tsweep run` pushes its own copy of mlflow.db: one writer at a time
        try:
            lock = SweepLock.acquire(store.uri, store=store)
        except UserError as exc:
            raise UserError(f"{exc}; its MLflow store (mlflow.db) is that driver's: evaluate when it ends") from None
    try:
        if own_db:
            store.pull("", view, keep=lambda r: r == DEFAULT_DB)  # the latest, now that no driver writes it
        return {**unreadable, **_fan_out(_evaluate_stored, jobs, es, **fan, on_done=replay)}
    finally:
        if lock:
            try:
                if logged:
                    store.put(view / DEFAULT_DB, DEFAULT_DB)
            finally:
                lock.release()


def _fan_out(fn, jobs, es, address, num_cpus, cpus, gpus, progress, on_done=None) -> dict:
    """``fn(es, *args)`` as one Ray task per (trial_id, args) of ``jobs``; {trial_id: record}, each record passed
    through ``on_done(trial_id, record)`` in the driver as it arrives."""
    from tqdm import tqdm

    init_ray(address, num_cpus)
    import ray

    try:
        if gpus is None:
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
        task = ray.remote(num_cpus=cpus, num_gpus=gpus, max_retries=1)(fn)
        shared = ray.put(es)
        pending = {task.remote(shared, *args): tid for tid, args in jobs}
        out = {}
        start = time.time()
        with tqdm(total=len(jobs), unit="trial", desc=f"evaluate {es.name}", disable=not progress) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                tid = pending.pop(ready[0])
                try:
                    out[tid] = ray.get(ready[0])
                except Exception as exc:  # the worker died (out of memory, a lost node) after its retry
                    out[tid] = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
                if on_done:
                    out[tid] = on_done(tid, out[tid])
                if out[tid].get("bleu") is not None:
                    bar.set_postfix({"last BLEU": f"{out[tid]['bleu']:.2f}"}, refresh=False)
                bar.update(1)
        log.info("evaluated %d trials on %s in %.1f s", len(jobs), es.name, time.time() - start)
        return out
    finally:
        if not address:
            ray.shutdown()


def summary_lines(es: EvalSet, table: pd.DataFrame, fmt: Callable = lambda x: f"{x:.2f}") -> list[str]:
    """The per-trial table ``tsweep evaluate`` prints."""
    lines = [
        f"evaluation set {es.name}: {len(es)} sentences, fingerprint {es.fingerprint} ({es.origin})",
        f"{'trial':<24}{'row':<6}{'seed':>5}{'BLEU':>8}{'chrF':>8}{'PPL':>9}{'unseen chars':>14}  status",
    ]
    for _, r in table.iterrows():
        ok = r["status"] in ("evaluated", "skipped")
        unk = sum(r["unknown_chars"].values()) if ok and isinstance(r.get("unknown_chars"), dict) else "-"
        scores = f"{fmt(r['bleu']):>8}{fmt(r['chrf']):>8}{fmt(r['ppl']):>9}" if ok else f"{'-':>8}{'-':>8}{'-':>9}"
        why = "" if ok else f": {r.get('error', '')}"
        lines.append(f"{r['trial_id']:<24}{str(r['row']):<6}{str(r['seed']):>5}{scores}{unk:>14}  {r['status']}{why}")
    return lines
