"""Ray Tune runs a sweep: local Ray by default, an existing cluster with an address.

The only module that imports Ray.  Each trial is ``trial.run_trial`` in a Ray
worker; its workdir lies in the sweep directory (or is pushed to the sweep's
URI, see storage.py), so a retried trial (Ray FailureConfig) resumes from its
own checkpoint there, and an interrupted sweep is resumed with Tuner.restore
without re-running finished trials.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Callable, Optional

from transformer_core.errors import UserError

from .profiles import get_profile
from .spec import Spec, SpecError, Trial
from .storage import is_uri, open_storage
from .trial import read_result, run_trial

log = logging.getLogger(__name__)
TUNE_NAME = "tune"
_ADDRESS = re.compile(r"^(auto|(ray://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5})$")


def trial_payload(t: Trial, sweep_dir: str | Path, tracking: Optional[dict], preset: str) -> dict:
    return {
        "id": t.trial_id,
        "group": t.group,
        "row": t.row,
        "seed": t.seed,
        "values": t.values,
        "paper": t.paper,
        "profile": t.profile,
        "config_hash": t.config_hash,
        "preset": preset,
        "sweep_dir": str(sweep_dir),
        "tracking": tracking,
    }


def _final_metrics(result: dict) -> dict:
    diverged = result.get("status") != "finished"
    return {
        "dev_bleu": 0.0 if diverged else result["dev_bleu"],
        "dev_ppl": float("inf") if diverged else result["dev_ppl"],
        "test_bleu": 0.0 if diverged else result["test_bleu"],
        "status": result.get("status"),
        "done": True,
        "step": result.get("steps"),
    }


def _trainable(config: dict, payloads: list, search_keys: tuple = (), workers: int = 1, gpus: float = 0):
    """Ray Tune function trainable: one trial, intermediate dev metrics reported for schedulers."""
    from ray import tune

    if search_keys:  # a search suggestion: the base trial with sampled knobs, its own identity
        from transformer_core.run_config import make_run_config

        trial = json.loads(json.dumps(payloads[0]))
        trial["values"].update({k: config[k] for k in search_keys})
        h = make_run_config(trial["values"], trial["preset"]).content_hash()
        trial.update(
            config_hash=h, id=f"{trial['row']}-s{trial['seed']}-{h[:8]}", search={k: config[k] for k in search_keys}
        )
    else:
        trial = payloads[config["trial_index"]]
    if workers > 1:
        metrics = _data_parallel(trial, workers, gpus)
    else:
        result = run_trial(trial, report=lambda m: tune.report({**m, "tsweep_trial": trial["id"]}))
        metrics = _final_metrics(result)
    tune.report({**metrics, "tsweep_trial": trial["id"]})


def _ddp_worker(loop_config: dict) -> None:
    """One Ray Train worker of a data-parallel trial; rank 0 tracks, evaluates and writes the result."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    trial = dict(loop_config["trial"])
    if rank:
        trial["tracking"] = None
    run_trial(trial)


def _data_parallel(trial: dict, workers: int, gpus: float) -> dict:
    """Train one trial with Ray Train's TorchTrainer (DDP-style gradient sums; gloo on CPU, NCCL on GPU)."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(
        _ddp_worker,
        train_loop_config={"trial": trial},
        scaling_config=ScalingConfig(
            num_workers=workers, use_gpu=gpus > 0, resources_per_worker={"CPU": 1, "GPU": 1} if gpus > 0 else {"CPU": 1}
        ),
        run_config=RunConfig(name=f"ddp-{trial['id']}", storage_path=_join(trial["sweep_dir"], "ddp")),
    )
    trainer.fit()
    return _final_metrics(read_result(trial))


def _join(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}" if is_uri(location) else str(Path(location) / name)


def _search_domain(dist: dict):
    from ray import tune

    kind = dist["type"]
    if kind == "choice":
        return tune.choice(dist["values"])
    if kind == "int":
        return tune.randint(dist["low"], dist["high"] + 1)
    return (tune.loguniform if kind == "loguniform" else tune.uniform)(dist["low"], dist["high"])


def check_address(address: Optional[str]) -> None:
    if address is not None and not _ADDRESS.match(address):
        raise UserError(f"--address {address!r} is invalid: allowed 'auto', HOST:PORT or ray://HOST:PORT")


def _init_ray(address: Optional[str], num_cpus: Optional[int]) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:  # a fresh local instance, even where another Ray runs on this machine (--address auto joins that one)
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        raise UserError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None


def _sweep_state(sweep_dir: Path, spec: Spec, profile: str, resume: bool, where: str) -> dict:
    path = sweep_dir / "sweep.json"
    if path.exists():
        state = json.loads(path.read_text())
        if not resume:
            raise UserError(
                f"{where} already holds sweep {state['name']!r}: resume it with --resume, or give another --out"
            )
        if state["profile"] != profile:
            raise UserError(
                f"{where} was run with profile {state['profile']!r}, not {profile!r}: resume with the same profile"
            )
        return state
    if resume:
        raise UserError(f"nothing to resume in {where}: it holds no sweep.json (start it without --resume)")
    return {}


def run_sweep(
    spec: Spec,
    profile_name: str,
    sweep_dir: str | Path,
    address: Optional[str] = None,
    resume: bool = False,
    num_cpus: Optional[int] = None,
    echo: Callable[[str], None] = print,
) -> dict:
    """Run (or resume) a sweep; returns {trial_id: final state}."""
    from ray import tune
    from ray.tune import FailureConfig, RunConfig, Tuner

    check_address(address)
    profile = get_profile(profile_name)
    trials = spec.trials(profile)
    if spec.search and len(spec.rows) > 1:
        raise SpecError("search: a search tunes the base configuration; remove 'rows' (or 'search')")
    store = open_storage(str(sweep_dir))
    if store and address and not spec.tracking.get("uri"):
        raise UserError(
            "a sweep stored at a URI on a cluster needs an MLflow server every node reaches: set "
            "tracking.uri in the spec (the default SQLite file would live on this machine only)"
        )
    if store:  # a URI: the driver's own files live in local scratch and are pushed there
        store.check_writable()
        location, sweep_dir = store.uri, store.scratch / "driver"
        if not store.exists("sweep.json"):  # a fresh location: scratch left from an earlier sweep there is stale
            shutil.rmtree(store.scratch, ignore_errors=True)
        store.pull("", sweep_dir, keep=lambda r: "/" not in r, overwrite=False)
    else:
        sweep_dir = Path(sweep_dir).resolve()
        location = str(sweep_dir)
    state = _sweep_state(sweep_dir, spec, profile_name, resume, location)
    sweep_dir.mkdir(parents=True, exist_ok=True)

    from .tracking import default_uri, end_run, ensure_parent_run

    uri = spec.tracking.get("uri") or state.get("uri") or default_uri(sweep_dir)
    experiment = spec.tracking.get("experiment", spec.name)
    try:
        exp_id, parent = ensure_parent_run(
            uri, experiment, spec.name, {"profile": profile_name, "spec": spec.source}, state.get("parent_run_id")
        )
    except Exception as exc:  # a bad URI or unreachable server: one line, nothing run
        raise UserError(f"cannot use MLflow tracking URI {uri!r}: {str(exc).splitlines()[0]}") from None
    tracking = {"uri": uri, "experiment_id": exp_id, "parent_run_id": parent}
    state = {
        "name": spec.name,
        "spec": spec.source,
        "profile": profile_name,
        "profile_rules": profile.rules(),
        "uri": uri,
        "experiment_id": exp_id,
        "parent_run_id": parent,
        "created": state.get("created", time.time()),
        "trials": [t.trial_id for t in trials] if not spec.search else [],
        "metric": spec.metric,
        "mode": spec.mode,
        "plan": {
            t.trial_id: {"group": t.group, "row": t.row, "seed": t.seed, "paper": t.paper, "values": t.values}
            for t in trials
        }
        if not spec.search
        else {},
    }
    (sweep_dir / "sweep.json").write_text(json.dumps(state, indent=2))
    sync = (lambda: store.push(sweep_dir, "", top_level_only=True)) if store else (lambda: 0)
    sync()

    preset = spec.base.get("preset", "base")
    payloads = [trial_payload(t, location, tracking, preset) for t in trials]
    search_keys = tuple(spec.search["space"]) if spec.search else ()
    workers, gpus = spec.resources["workers"], spec.resources["gpus"]
    # a data-parallel trial holds no resources itself: its Ray Train workers take one CPU (or GPU) each
    resources = {"cpu": spec.resources["cpus"], "gpu": gpus} if workers == 1 else {"cpu": 0.01, "gpu": 0}
    trainable = tune.with_resources(
        tune.with_parameters(_trainable, payloads=payloads, search_keys=search_keys, workers=workers, gpus=gpus),
        resources,
    )
    _init_ray(address, num_cpus)
    path = _join(location, TUNE_NAME)
    if resume and Tuner.can_restore(path):
        echo(f"resuming {spec.name} from {path}")
        tuner = Tuner.restore(path, trainable, resume_unfinished=True, resume_errored=True)
    else:
        tuner = Tuner(
            trainable,
            param_space=_param_space(spec, payloads),
            tune_config=_tune_config(spec, sweep_dir, len(payloads)),
            run_config=RunConfig(
                name=TUNE_NAME,
                storage_path=location,
                verbose=1,
                failure_config=FailureConfig(max_failures=2),
                callbacks=[_EchoCallback(echo, spec.search["samples"] if spec.search else len(payloads), sync)],
            ),
        )
    grid = tuner.fit()
    summary = _summarise(grid, sweep_dir)
    _close_stopped_runs(store.view() if store else sweep_dir, uri)
    (sweep_dir / "tune_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    end_run(uri, parent, "FINISHED")
    sync()
    return summary


def _param_space(spec: Spec, payloads: list) -> dict:
    from ray import tune

    if spec.search:
        return {k: _search_domain(d) for k, d in spec.search["space"].items()}
    return {"trial_index": tune.grid_search(list(range(len(payloads))))}


def _tune_config(spec: Spec, sweep_dir: Path, n: int):
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
        metric=spec.metric,
        mode=spec.mode,
        scheduler=scheduler,
        search_alg=search_alg,
        num_samples=spec.search["samples"] if spec.search else 1,
        max_concurrent_trials=spec.max_concurrent,
    )


def _summarise(grid, sweep_dir: Path) -> dict:
    out = {}
    for r in grid:
        m = r.metrics or {}
        key = m.get("tsweep_trial") or Path(r.path).name
        out[key] = {
            "error": str(r.error).splitlines()[0] if r.error else None,
            "status": m.get("status"),
            "dev_bleu": m.get("dev_bleu"),
            "reports": m.get("training_iteration"),
            "config": r.config,
        }
    return out


def _close_stopped_runs(sweep_dir: Path, tracking_uri: str) -> None:
    """Trials a scheduler stopped early (or that errored out) end their MLflow child run as KILLED/FAILED."""
    from .tracking import _client, _retry

    client = None
    for workdir in (sweep_dir / "trials").glob("*"):
        marker, result = workdir / "mlflow_run_id", workdir / "result.json"
        if marker.exists() and not result.exists():
            client = client or _client(tracking_uri)
            run = client.get_run(marker.read_text().strip())
            if run.info.status == "RUNNING":
                _retry(client.set_tag, run.info.run_id, "stopped_early", "true")
                _retry(client.set_terminated, run.info.run_id, "KILLED")


class _EchoCallback:
    """One line per trial that ends, beside Tune's own status table."""

    def __new__(cls, echo, total, sync=lambda: 0):
        from ray.tune import Callback

        class Echo(Callback):
            ended = 0

            def on_trial_complete(self, iteration, trials, trial, **info):
                m = trial.last_result or {}
                self.ended += 1
                echo(
                    f"[{self.ended}/{total}] {m.get('tsweep_trial', trial.trial_id)}: {m.get('status', 'stopped')} "
                    f"dev_bleu={m.get('dev_bleu', float('nan')):.2f} step={m.get('step')}"
                )
                sync()

            def on_trial_error(self, iteration, trials, trial, **info):
                echo(f"trial {trial.trial_id} failed (Ray retries it from its checkpoint up to 2 times)")

        return Echo()
