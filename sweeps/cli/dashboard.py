"""`tsweep dashboard SWEEP`: MLflow's UI on the sweep's own SQLite store and its artifacts and, for a search,
optuna-dashboard on its optuna.db, both bound to 127.0.0.1 on free ports, until Ctrl-C or until either exits.

Each server runs as a child process in its own process group (so a terminal's Ctrl-C reaches this command only,
and stopping a server stops the workers it started); what the servers print goes to log files in a temporary
folder, whose last line is quoted when a server exits by itself."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Optional
from urllib.parse import unquote

from transformer_core.errors import UserError

HOST = "127.0.0.1"  # loopback only: the servers are for the person at this machine
READY_SECONDS = 120.0  # how long a server may take to answer its first HTTP request
STOP_SECONDS = 10.0  # how long a server may take to exit after SIGTERM before it is killed


@dataclass
class Server:
    """One dashboard server: its name as messages say it, its command line, its URL and what it serves."""

    name: str
    argv: list[str]
    url: str
    serves: str
    env: dict = field(default_factory=dict)  # set in the server's environment
    proc: Optional[subprocess.Popen] = None
    log: Optional[Path] = None
    ready: bool = False


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _executable(name: str) -> Optional[str]:
    """The console script ``name`` of this Python's environment, else the one on PATH (None: not installed)."""
    own = Path(sys.executable).with_name(name)
    return str(own) if own.is_file() else shutil.which(name)


def _sqlite_file(uri: str) -> Optional[Path]:
    """The file a ``sqlite:///PATH`` URI names (None for any other URI)."""
    prefix = "sqlite:///"
    path = unquote(uri[len(prefix) :].split("?", 1)[0]) if uri.startswith(prefix) else ""
    return Path(path) if path else None


def servers(sweep_dir: str) -> list[Server]:
    """The servers of the sweep at ``sweep_dir`` (a local directory), every check done first: MLflow's UI on the
    sweep's MLflow store (re-rooted at the sweep when it is the sweep's own mlflow.db) with new artifacts in
    SWEEP/mlartifacts (without MLflow's job runner: a consumer of ten workers for GenAI jobs, which a sweep's store
    has no use for), and optuna-dashboard on SWEEP/optuna.db where the sweep is a search.  A sweep that is not
    one, a URI, a store that is not a SQLite file on this machine, or a search without optuna-dashboard installed is
    a UserError."""
    from analysis.report.search_report import is_search_sweep
    from sweeps.run.tracking import ARTIFACTS, DEFAULT_DB, sweep_store_uri
    from sweeps.state.search_state import DB
    from sweeps.state.storage import is_uri
    from sweeps.state.sweep_state import read_sweep_state

    if is_uri(sweep_dir):
        raise UserError(f"{sweep_dir!r} is a URI: tsweep dashboard serves a sweep directory on this machine (copy the "
                        "sweep here, or open its MLflow tracking server's own UI)")  # fmt: skip
    root = Path(sweep_dir)
    state = read_sweep_state(root)  # no sweep.json, or an unreadable one: one line
    stored = state.get("uri") or DEFAULT_DB
    if not isinstance(stored, str):
        raise UserError(f"sweep.json in {sweep_dir} is unreadable: its MLflow uri is {stored!r}, not a URI")
    uri = sweep_store_uri(stored, root)  # the sweep's own store: its artifact locations re-rooted at the sweep
    db = _sqlite_file(uri)
    if db is None:
        raise UserError(f"sweep {state.name!r} tracks in MLflow at {uri}, not in a SQLite file on this machine: "
                        "open that tracking server's own UI")  # fmt: skip
    if not db.is_file():
        raise UserError(f"sweep {state.name!r}: its MLflow store {db} does not exist (the sweep has not started, "
                        "or the file was moved)")  # fmt: skip
    mlflow = _executable("mlflow")
    if mlflow is None:
        raise UserError("MLflow's command line (mlflow) is not installed in this environment: pip install -e .")
    artifacts = root.resolve() / ARTIFACTS
    port = free_port()
    out = [Server("MLflow UI", [mlflow, "server", "--backend-store-uri", uri, "--default-artifact-root",
                                artifacts.as_uri(), "--artifacts-destination", artifacts.as_uri(), "--host", HOST,
                                "--port", str(port), "--workers", "1"],
                  f"http://{HOST}:{port}", f"{db}, artifacts in {artifacts}",
                  {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"})]  # fmt: skip
    if is_search_sweep(root):
        study = root / DB
        if not study.is_file():
            raise UserError(f"search {state.name!r} has no Optuna study ({study} does not exist)")
        dashboard = _executable("optuna-dashboard")
        if dashboard is None:
            raise UserError(f"{state.name!r} is a search, and optuna-dashboard is not installed: pip install -e "
                            "'.[dashboard]'")  # fmt: skip
        port = free_port()
        out.append(Server("optuna-dashboard", [dashboard, f"sqlite:///{study.resolve()}", "--host", HOST, "--port",
                                               str(port)],
                          f"http://{HOST}:{port}", f"{study.resolve()}, study {state.name!r}"))  # fmt: skip
    return out


def answers(url: str) -> bool:
    """Whether ``url`` answers HTTP 200 now (redirects followed)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def last_line(path: Optional[Path]) -> str:
    """The last non-blank line of a server's log ('' where there is none)."""
    try:
        lines = [x.strip() for x in (path.read_text(errors="replace") if path else "").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def start(server: Server, logs: Path) -> None:
    """Start ``server`` as a child in a process group of its own, its output in ``logs``/NAME.log."""
    server.log = logs / f"{server.name.replace(' ', '-')}.log"
    with server.log.open("w") as log:
        server.proc = subprocess.Popen(server.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env={**os.environ, **server.env}, start_new_session=True)  # fmt: skip


def stop(server: Server) -> None:
    """End ``server`` and whatever it started (its process group): SIGTERM, then SIGKILL after STOP_SECONDS."""
    proc = server.proc
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_SECONDS), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)  # the group outlives its leader where a worker is still running
        except ProcessLookupError:
            break
        except PermissionError:  # noqa: S110 - a group whose pid was reused: end the leader alone below
            pass
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            try:  # the leader exited; end the workers it may have left in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        break


class _Stop(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: stop the servers (a KeyboardInterrupt, so that one arriving while they are being
    stopped ends the command as tsweep's own interrupted line)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum, frame) -> None:
    raise _Stop(signum)


def serve(found: list[Server], out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    """Start every server, print each URL once it answers, and wait: SIGINT or SIGTERM stops them all (exit 0); a
    server that exits (or does not answer within READY_SECONDS) stops the others, with one line saying which (exit
    1)."""
    before = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    names = " and ".join(s.name for s in found)
    try:
        with tempfile.TemporaryDirectory(prefix="tsweep-dashboard-") as logs:
            try:
                for server in found:
                    start(server, Path(logs))
                return _watch(found, out, err)
            except _Stop as stopped:
                print(f"{signal.Signals(stopped.signum).name}: stopping {names}", file=out, flush=True)
                return 0
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave a server running
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                for server in found:
                    stop(server)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _watch(found: list[Server], out: IO[str], err: IO[str]) -> int:
    """Poll the started servers until one exits (exit 1, one line) or a signal raises _Stop."""
    started = time.time()
    while True:
        for server in found:
            assert server.proc is not None
            code = server.proc.poll()
            if code is not None or (not server.ready and time.time() - started > READY_SECONDS):
                others = [s.name for s in found if s is not server]
                why = f"exited with code {code}" if code is not None else f"did not answer within {READY_SECONDS:g} s"
                line = last_line(server.log)
                print(f"tsweep dashboard: {server.name} {why}{f' ({line})' if line else ''}"
                      f"{f'; stopping {others[0]}' if others else ''}", file=err, flush=True)  # fmt: skip
                return 1
            if not server.ready and answers(server.url):
                server.ready = True
                print(f"{server.name}: {server.url}  ({server.serves})", file=out, flush=True)
                if all(s.ready for s in found):
                    print("Ctrl-C stops " + (" and ".join(s.name for s in found)), file=out, flush=True)
        time.sleep(0.25)


def cmd_dashboard(args) -> int:
    return serve(servers(args.sweep_dir))


def register(sub) -> None:
    p = sub.add_parser(
        "dashboard",
        help="MLflow's UI and, for a search, optuna-dashboard on one sweep, on 127.0.0.1 (Ctrl-C stops both)",
        description="Start MLflow's UI on the sweep's own MLflow store (SWEEP/mlflow.db, artifacts in "
        "SWEEP/mlartifacts) and, where the sweep is a search, optuna-dashboard on SWEEP/optuna.db, both bound to "
        "127.0.0.1 on free ports; print their URLs once they answer; stop both on Ctrl-C (SIGINT) or SIGTERM, and "
        "when either exits (one line says which; exit 1).",
    )
    p.add_argument("sweep_dir", metavar="SWEEP", help="a sweep directory on this machine (the --out of tsweep run)")
    p.set_defaults(func=cmd_dashboard)
