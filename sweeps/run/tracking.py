"""MLflow behind the trainer's tracker interface: one parent run per sweep, one child run per trial.

By default the store is a SQLite file in the sweep directory; sweep.json then
records it as the bare file name (``mlflow.db``), relative to the sweep, so a
copied or moved sweep writes into its own database (``resolve_uri``).  Its artifacts live in the sweep's
``mlartifacts`` folder; MLflow records that folder as an absolute URI, so opening a local sweep's own store
(``sweep_store_uri``) first re-roots what the store records at the sweep's own folder (``reroot_artifacts``).
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

from transformer_core.errors import UserError

log = logging.getLogger(__name__)
# MLflow 3 sends usage telemetry to a host on the internet unless MLFLOW_DISABLE_TELEMETRY (or DO_NOT_TRACK) is
# "true"; it reads the variable when it would send, so setting it here, before any MLflow client, keeps this
# process and everything it starts (Ray workers, the dashboard's server) on loopback.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


DEFAULT_DB = "mlflow.db"
ARTIFACTS = "mlartifacts"  # the sweep's artifact folder, beside DEFAULT_DB


def default_uri(sweep_dir: Path) -> str:
    return f"sqlite:///{(Path(sweep_dir) / DEFAULT_DB).resolve()}"


def artifact_root(sweep_dir: Path) -> str:
    """The artifact location of a local sweep's experiment: its own ``mlartifacts`` folder, as a file URI."""
    return (Path(sweep_dir).resolve() / ARTIFACTS).as_uri()


def stored_uri(uri: str, sweep_dir: Path) -> str:
    """What sweep.json records: the default SQLite file relative to the sweep, any other URI as given."""
    return DEFAULT_DB if uri == default_uri(sweep_dir) else uri


def resolve_uri(stored: str, sweep_dir: Path) -> str:
    """The tracking URI from sweep.json's ``uri`` (``mlflow.db`` there: the sweep directory's own SQLite file)."""
    return default_uri(sweep_dir) if stored == DEFAULT_DB else stored


def sweep_store_uri(stored: str, sweep_dir: Path) -> str:
    """``resolve_uri`` for a sweep on this machine: its own SQLite store (``mlflow.db``) re-rooted at
    ``sweep_dir`` first, so that what MLflow writes for it lands inside the sweep."""
    if stored == DEFAULT_DB:
        reroot_artifacts(sweep_dir)
    return resolve_uri(stored, sweep_dir)


def _local_path(location: str) -> Path | None:
    """The folder a ``file:`` URI or an absolute path names; None for any other URI."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(location) if not parsed.scheme and location.startswith("/") else None


def _moved_roots(con: sqlite3.Connection, own: Path) -> list[tuple[str, str]]:
    """(experiment id, location) of the experiments whose artifact folder is another directory's mlartifacts."""
    moved = []
    for exp_id, location in con.execute("SELECT experiment_id, artifact_location FROM experiments"):
        path = _local_path(location or "")
        if path is not None and path.name == ARTIFACTS and path != own:
            moved.append((exp_id, location))
    return moved


def reroot_artifacts(sweep_dir: Path) -> list[str]:
    """Point the artifact locations that the sweep's own SQLite store records (its experiments', their runs'
    and logged models') at ``SWEEP/mlartifacts`` where they name another directory's ``mlartifacts`` (the sweep
    was copied or moved); returns the locations replaced.  A store that cannot be rewritten is a UserError
    naming it: MLflow would write the sweep's artifacts into the other directory."""
    sweep_dir = Path(sweep_dir)
    db = sweep_dir / DEFAULT_DB
    own = sweep_dir.resolve() / ARTIFACTS
    if not db.is_file() or db.stat().st_size == 0:
        return []
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=rw", uri=True, timeout=30)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "experiments" not in tables:
                return []
            moved = _moved_roots(con, own)
            if moved:
                with con:
                    for exp_id, old in moved:
                        _reroot_one(con, tables, exp_id, old, artifact_root(sweep_dir))
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise UserError(f"{db}: its MLflow artifact locations cannot be read or re-rooted at {own} ({exc}); "
                        "allowed a writable MLflow SQLite store, or delete it to start the sweep's tracking "
                        "afresh") from None  # fmt: skip
    for _, old in moved:
        log.info("%s: MLflow artifacts re-rooted from %s to %s (the sweep was copied or moved)", db, old, own)
    return [old for _, old in moved]


def _reroot_one(con: sqlite3.Connection, tables: set, exp_id, old: str, new: str) -> None:
    """Replace the artifact location ``old`` by ``new`` in experiment ``exp_id``, its runs and logged models."""
    con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (new, exp_id))
    for table, column in (("runs", "artifact_uri"), ("logged_models", "artifact_location")):
        if table in tables:
            con.execute(
                f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                f"WHERE experiment_id = ? AND substr({column}, 1, ?) = ?",
                (new, len(old) + 1, exp_id, len(old) + 1, old + "/"),
            )


REACH_SECONDS = 5.0  # how long a tracking server may take to accept a connection before it counts as unreachable
_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306, "mssql": 1433}  # the servers' default ports


def check_reachable(uri: str, timeout: float = REACH_SECONDS) -> None:
    """Refuse, in one line, a tracking URI naming a server (http, https, or a database: postgresql, mysql, mssql)
    that accepts no TCP connection at its host and port within ``timeout`` seconds: MLflow would retry it for
    minutes before failing.  A local store (a SQLite file, a folder) passes; nothing is sent to the server."""
    parsed = urlparse(uri or "")
    scheme = parsed.scheme.split("+")[0]  # postgresql+psycopg2
    if scheme not in _PORTS:
        return
    try:
        host, port = parsed.hostname, parsed.port or _PORTS[scheme]
    except ValueError as exc:  # a port that is not a number, or out of range
        raise UserError(f"MLflow tracking URI {uri!r} is invalid ({exc}); allowed SCHEME://HOST[:PORT]/...") from None
    if not host:
        raise UserError(f"MLflow tracking URI {uri!r} names no host; allowed SCHEME://HOST[:PORT]/...")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise UserError(f"MLflow tracking server {host}:{port} ({uri}) is not reachable: {why} within {timeout:g} s; "
                        "allowed a running server (mlflow server --host HOST --port PORT), or no tracking.uri in "
                        "the spec for the sweep's own mlflow.db") from None  # fmt: skip


def mlflow_client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def retry_locked(fn, *args, **kwargs):
    """SQLite allows one writer at a time: retry briefly when trials write together."""
    for attempt in range(8):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # mlflow wraps sqlalchemy's OperationalError in MlflowException
            if "locked" not in str(exc).lower() or attempt == 7:
                raise
            time.sleep(0.2 * (attempt + 1))


def ensure_parent_run(
    uri: str,
    experiment: str,
    sweep_name: str,
    tags: dict,
    existing: str | None = None,
    artifact_location: str | None = None,
) -> tuple[str, str]:
    """Create (or find) the sweep's experiment and parent run; returns (experiment_id, run_id).

    A new experiment keeps its artifacts at ``artifact_location`` (the sweep's own
    directory), not in ./mlruns of whichever directory the driver was started from.
    An existing parent run (a resume) is set back to RUNNING."""
    client = mlflow_client(uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment, artifact_location=artifact_location)
    if existing:
        retry_locked(client.update_run, existing, status="RUNNING")
        return exp_id, existing
    run = client.create_run(
        exp_id, run_name=sweep_name, tags={"sweep": sweep_name, **{k: str(v) for k, v in tags.items()}}
    )
    return exp_id, run.info.run_id


def end_run(uri: str, run_id: str, status: str) -> None:
    retry_locked(mlflow_client(uri).set_terminated, run_id, status)


def end_open_runs(uri: str, run_ids: list[str], status: str, tag: str) -> list[str]:
    """End those of ``run_ids`` still RUNNING as ``status`` (KILLED, FAILED) with tag ``tag``=true; returns them."""
    if not run_ids:
        return []
    client, ended = mlflow_client(uri), []
    for run_id in run_ids:
        run = client.get_run(run_id)
        if run.info.status == "RUNNING":
            retry_locked(client.set_tag, run_id, tag, "true")
            retry_locked(client.set_terminated, run_id, status)
            ended.append(run_id)
    return ended


class MlflowTracker:
    """The child run of one trial.  Re-attaches to the same run when a trial is retried or resumed."""

    def __init__(self, uri: str, experiment_id: str, parent_run_id: str, workdir: Path, name: str, tags: dict):
        self.client = mlflow_client(uri)
        marker = Path(workdir) / "mlflow_run_id"
        if marker.exists():
            self.run_id = marker.read_text().strip()
            retry_locked(self.client.update_run, self.run_id, status="RUNNING")
        else:
            run = retry_locked(
                self.client.create_run,
                experiment_id,
                run_name=name,
                tags={"mlflow.parentRunId": parent_run_id, **{k: str(v) for k, v in tags.items()}},
            )
            self.run_id = run.info.run_id
            Path(workdir).mkdir(parents=True, exist_ok=True)
            marker.write_text(self.run_id)

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:500]) for k, v in params.items()]
        for i in range(0, len(items), 90):
            retry_locked(self.client.log_batch, self.run_id, params=items[i : i + 90])

    def log_metrics(self, metrics: dict, step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items() if isinstance(v, (int, float))]
        retry_locked(self.client.log_batch, self.run_id, metrics=items)

    def log_artifact(self, path: str) -> None:
        if Path(path).exists():
            retry_locked(self.client.log_artifact, self.run_id, path)

    def set_status(self, status: str, reason: str = "") -> None:
        if reason:
            retry_locked(self.client.set_tag, self.run_id, "failure_reason", reason[:5000])
        retry_locked(self.client.set_terminated, self.run_id, status)


def describe_parent(uri: str, run_id: str, params: dict, tags: dict, metrics: dict | None = None) -> None:
    """What the sweep's parent run shows in MLflow's UI: ``params`` (fixed for the sweep: the spec, the profile;
    one that a resume would change is skipped rather than refused), ``tags`` (what changes: the commit, the
    verdicts) and ``metrics`` (trials finished, device-hours)."""
    from mlflow.entities import Metric, Param, RunTag

    client = mlflow_client(uri)
    have = client.get_run(run_id).data.params
    new = [Param(k, str(v)[:500]) for k, v in params.items() if k not in have]
    now = int(time.time() * 1000)
    items = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if isinstance(v, (int, float))]
    retry_locked(
        client.log_batch, run_id, metrics=items, params=new, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()]
    )


def log_report(uri: str, run_id: str, report_dir: Path, verdicts: dict) -> None:
    """The report folder as the parent run's artifacts (under report/) and each claim-reading's verdict as a tag
    (``verdict.CLAIM.READING``)."""
    client = mlflow_client(uri)
    tags = {f"verdict.{claim}.{reading}": v for (claim, reading), v in verdicts.items()}
    if tags:
        describe_parent(uri, run_id, {}, tags)
    retry_locked(client.log_artifacts, run_id, str(report_dir), "report")


def git_commit(where: Path) -> str:
    """The commit of the code that runs (``unknown`` outside a git checkout)."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=where)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
