"""`tsweep evaluate` over a sweep: every finished trial scored on a named set, one Ray task per trial.

The work of one trial is ``transformer_core.inference.evaluate_run`` (no Ray; the ``--run`` form calls it
directly); this module picks the trials, reads the set once in the driver (so a cluster's workers need
no copy of the files), skips trials already scored on it, and fans the rest out over a local Ray (the
one ``tsweep run`` starts) or the cluster at ``address``, with a progress bar.  Each trial's scores go
to its MLflow child run as metrics ``NAME_bleu``, ``NAME_chrf``, ``NAME_ppl``, ``NAME_unknown_chars``,
tags with the signatures and the set's fingerprint, and artifacts under ``evals/``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Callable, Optional

import pandas as pd

from analysis.collect import collect
from transformer_core.data import get_recipe
from transformer_core.data.prepare import parse_corpus_name
from transformer_core.errors import UserError
from transformer_core.evaluation import EvalSet, EvalSetError, read_eval_set
from transformer_core.inference import EVALS, done_evaluation, evaluate_run, read_run
from transformer_core.rundir import TRACKING, Status
from transformer_core.tracking import JsonTracker

from .lock import read_sweep_state
from .runner import _init_ray, check_address
from .storage import is_uri
from .tracking import MlflowTracker, _client, _retry, resolve_uri

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run_id"  # written by tracking.MlflowTracker in a trial's directory


class ChildRunTracker(MlflowTracker):
    """A trial's existing MLflow child run, left in its state: evaluation metrics, tags (replaceable, unlike
    params: a set scored again replaces its signature) and artifacts under evals/."""

    def __init__(self, uri: str, run_id: str):  # attach only: never create a run or set it RUNNING
        self.client, self.run_id = _client(uri), run_id

    def log_params(self, params: dict) -> None:
        for key, value in params.items():
            _retry(self.client.set_tag, self.run_id, key, str(value)[:5000])

    def log_artifact(self, path: str) -> None:
        if Path(path).exists():
            _retry(self.client.log_artifact, self.run_id, path, EVALS)


def trial_tracker(workdir: Path, tracking_uri: Optional[str] = None):
    """Where a run's evaluation is reported: its MLflow child run (a sweep's trial) or its tracking.jsonl."""
    workdir = Path(workdir)
    marker = workdir / RUN_ID_FILE
    if tracking_uri is None and marker.exists():  # a trial given as --run: its sweep is two levels up
        sweep = workdir.parent.parent
        try:
            state = json.loads((sweep / "sweep.json").read_text())
            tracking_uri = resolve_uri(state["uri"], sweep) if state.get("uri") else None
        except (OSError, ValueError):
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


def finished_trials(sweep_dir: Path, rows: Optional[list[str]]) -> pd.DataFrame:
    """The sweep's finished trials (of ``rows``), refused in one line when there are none."""
    if is_uri(str(sweep_dir)):
        raise UserError(f"{sweep_dir}: evaluate reads a local sweep directory (or a mount of it), not a URI")
    read_sweep_state(sweep_dir)  # a missing or unreadable sweep.json: one line
    df = collect(sweep_dir)
    if rows:
        unknown = [r for r in rows if r not in set(df["row"])]
        if unknown:
            allowed = ", ".join(dict.fromkeys(df["row"]))
            raise UserError(f"--rows {','.join(unknown)}: not in sweep {str(sweep_dir)!r}; allowed {allowed}")
        df = df[df["row"].isin(rows)]
    fin = df[df["status"] == Status.FINISHED.value]
    if fin.empty:
        states = "; ".join(f"{n} {s}" for s, n in sorted(df["status"].value_counts().items())) or "no trials"
        raise UserError(f"sweep {str(sweep_dir)!r} has no finished trial ({states}): nothing to evaluate")
    return fin


def _evaluate_trial(workdir: str, es: EvalSet, tracking_uri: Optional[str], device: str, data_dir, threads: int):
    """One Ray task: a trial scored on the set; a failure comes back as a record, never as an exception."""
    import torch

    torch.set_num_threads(max(1, threads))  # the run's own threads setting, where it has one, wins
    try:
        record = evaluate_run(workdir, es, trial_tracker(Path(workdir), tracking_uri), device, data_dir)
    except UserError as exc:
        return {"status": "failed", "error": str(exc)}
    except Exception as exc:  # one trial's broken checkpoint must not lose the other trials' results
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {"status": "failed", "error": f"{type(exc).__name__}: {first}"}
    return record


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
    """Score every finished trial (of ``rows``) on ``spec``; returns the set and one line per trial."""
    check_address(address)
    sweep_dir = Path(sweep_dir)
    fin = finished_trials(sweep_dir, rows)
    es = evaluation_set(spec, name, Path(fin["workdir"].iloc[0]), data_dir)
    state = read_sweep_state(sweep_dir)
    uri = resolve_uri(state["uri"], sweep_dir) if state.get("uri") else None
    records = {tid: done_evaluation(wd, es) for tid, wd in zip(fin["trial_id"], fin["workdir"])}
    records = {tid: {**r, "status": "skipped"} for tid, r in records.items() if r}
    todo = [(tid, wd) for tid, wd in zip(fin["trial_id"], fin["workdir"]) if tid not in records]
    if todo:
        records.update(
            _fan_out(todo, es, uri, address, num_cpus, device, data_dir, cpus_per_task, gpus_per_task, progress)
        )
    lines = []
    for _, t in fin.iterrows():
        r = records[t["trial_id"]]
        lines.append({"trial_id": t["trial_id"], "row": t["row"], "seed": t["seed"], **r})
    return es, pd.DataFrame(lines)


def _fan_out(todo, es, uri, address, num_cpus, device, data_dir, cpus, gpus, progress) -> dict:
    from tqdm import tqdm

    _init_ray(address, num_cpus)
    import ray

    try:
        if gpus is None:
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
        task = ray.remote(num_cpus=cpus, num_gpus=gpus, max_retries=1)(_evaluate_trial)
        shared = ray.put(es)
        pending = {task.remote(str(wd), shared, uri, device, data_dir, cpus): tid for tid, wd in todo}
        out = {}
        start = time.time()
        with tqdm(total=len(todo), unit="trial", desc=f"evaluate {es.name}", disable=not progress) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                tid = pending.pop(ready[0])
                try:
                    out[tid] = ray.get(ready[0])
                except Exception as exc:  # the worker died (out of memory, a lost node) after its retry
                    out[tid] = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
                if out[tid].get("bleu") is not None:
                    bar.set_postfix({"last BLEU": f"{out[tid]['bleu']:.2f}"}, refresh=False)
                bar.update(1)
        log.info("evaluated %d trials on %s in %.1f s", len(todo), es.name, time.time() - start)
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
