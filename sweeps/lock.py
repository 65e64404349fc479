"""Guards on a sweep directory: one driver at a time, state files written whole, nothing written outside.

- ``SweepLock``: the ``tsweep run`` driver's exclusive lock.  On a local path it
  is ``fcntl.flock`` on ``DIR/sweep.lock``, whose JSON body (pid, host, time)
  names the holder in a second driver's message; the kernel drops the lock when
  its driver dies, and a body left by a dead driver is taken over with a
  warning.  At a URI it is a ``sweep.lock`` object (best effort: object stores
  offer no atomic create through pyarrow).
- State files (sweep.json, tune_summary.json, trial.json) are written with
  ``transformer_core.rundir.write_json`` (temp file, fsync, rename): a full disk
  or a kill leaves the previous version, never a truncated one.
- ``read_state``, ``check_state``, ``locate``, ``check_out_dir``, ``check_inside``: what
  ``tsweep run`` checks before it writes anything, and where a sweep may write.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional

from transformer_core.errors import UserError
from transformer_core.run_config import RUN_ONLY, DataConfig, TrainConfig
from transformer_core.rundir import DiskFullError

from .profiles import same_profile
from .storage import Storage, open_storage

log = logging.getLogger(__name__)
LOCK_NAME = "sweep.lock"
SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")
SAFE_ALLOWED = "letters, digits, '_', '.', '-' (not starting with '.')"
_OUT_ALLOWED = "allowed a new or empty directory, or the directory of an earlier run of this spec"


class SweepLocked(UserError):
    """Another driver runs this sweep."""

    exit_code = 2


def _me() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "time": time.time(), "token": uuid.uuid4().hex}


def _since(body: dict) -> str:
    t = body.get("time")
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if isinstance(t, (int, float)) else "?"


def _held_message(where: str, body: dict) -> str:
    return f"sweep {where} is being run by pid {body.get('pid', '?')} on {body.get('host', '?')} since {_since(body)}"


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _parse(text: str) -> dict:
    try:
        body = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class SweepLock:
    """Held by one driver from before it reads sweep.json until the sweep ends (``release``)."""

    def __init__(self, where: str, fd: Optional[int] = None, store=None, token: str = ""):
        self.where, self.fd, self.store, self.token = where, fd, store, token

    @classmethod
    def acquire(cls, where: str, sweep_dir: Optional[Path] = None, store=None) -> "SweepLock":
        """Lock ``sweep_dir`` (a local path) or the sweep at ``store`` (a URI); ``where`` names it in messages."""
        return cls._acquire_remote(where, store) if store is not None else cls._acquire_local(where, Path(sweep_dir))

    @classmethod
    def _acquire_local(cls, where: str, sweep_dir: Path) -> "SweepLock":
        try:
            sweep_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(sweep_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"cannot create the sweep directory {where}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            body = _parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            os.close(fd)
            raise SweepLocked(_held_message(where, body)) from None
        previous = _parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        if previous and previous.get("host") != socket.gethostname():
            # flock may not reach across hosts on every network filesystem: trust the body
            os.close(fd)
            raise SweepLocked(f"{_held_message(where, previous)} (if it is not, delete {sweep_dir / LOCK_NAME})")
        if previous:  # a driver on this host ended without releasing it (killed): its flock is gone with it
            state = "no longer running" if not _alive(previous.get("pid")) else "not holding it"
            log.warning("taking over the stale lock of %s (pid %s is %s)", where, previous.get("pid"), state)
        me = _me()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        os.fsync(fd)
        return cls(where, fd=fd, token=me["token"])

    @classmethod
    def _acquire_remote(cls, where: str, store) -> "SweepLock":
        if store.exists(LOCK_NAME):
            body = _parse(store.read_text(LOCK_NAME))
            stale = body.get("host") == socket.gethostname() and not _alive(body.get("pid"))
            if body and not stale:
                raise SweepLocked(f"{_held_message(where, body)} (if it is not, delete {where}/{LOCK_NAME})")
            if body:
                log.warning("taking over the stale lock of %s (pid %s is no longer running)", where, body.get("pid"))
        me = _me()
        store.write_text(LOCK_NAME, json.dumps(me))
        if _parse(store.read_text(LOCK_NAME)).get("token") != me["token"]:  # another driver wrote after us
            raise SweepLocked(_held_message(where, _parse(store.read_text(LOCK_NAME))))
        return cls(where, store=store, token=me["token"])

    def release(self) -> None:
        """Clear the body and unlock; the local file stays (deleting it would let two drivers lock two files)."""
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
                self.fd = None
        elif self.store is not None:
            try:
                if _parse(self.store.read_text(LOCK_NAME)).get("token") == self.token:
                    self.store.fs.delete_file(self.store.path(LOCK_NAME))
            except (OSError, FileNotFoundError):
                pass
            self.store = None


def read_state(store: Optional[Storage], sweep_dir: Path, where: str) -> Optional[dict]:
    """sweep.json of the sweep (None where there is none); one line when it cannot be read."""
    try:
        if store:
            text = store.read_text("sweep.json") if store.exists("sweep.json") else None
        else:
            text = (sweep_dir / "sweep.json").read_text() if (sweep_dir / "sweep.json").exists() else None
        if text is None:
            return None
        state = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UserError(f"sweep.json in {where} is unreadable: {str(exc).splitlines()[0]}") from None
    if not isinstance(state, dict) or not isinstance(state.get("name"), str) or not isinstance(state.get("plan"), dict):
        raise UserError(f"sweep.json in {where} is unreadable: it is not a sweep's state (no name or plan)")
    return state


def read_sweep_state(location: str | Path) -> dict:
    """sweep.json of a sweep directory or URI, or one line saying why it cannot be read."""
    store = open_storage(str(location))
    state = read_state(store, Path(location), str(location))
    if state is None:
        raise UserError(f"{str(location)!r} is not a sweep directory (no sweep.json): give the --out of 'tsweep run'")
    return state


def check_state(
    state: Optional[dict], name: str, profile: str, resume: bool, where: str, rules: Optional[dict] = None
) -> dict:
    """The state of the sweep at --out, if it may be (re)run by this spec and profile (``{}``: a new sweep).
    ``rules``: the profile's rules now; a sweep planned under other rules of the same profile (the profile was
    recalibrated since) is refused, since its trials and the new ones would be measured at two budgets."""
    if state is None:
        if resume:
            raise UserError(f"nothing to resume in {where}: it holds no sweep.json (start it without --resume)")
        return {}
    if state["name"] != name:
        raise UserError(f"--out {where} holds sweep {state['name']!r}, not {name!r}: give another --out")
    if not resume:
        raise UserError(
            f"{where} already holds sweep {state['name']!r}: resume it with --resume, or give another --out"
        )
    if not same_profile(state.get("profile"), profile):  # an alias and the profile's own name are one profile
        raise UserError(
            f"{where} was run with profile {state.get('profile')!r}, not {profile!r}: resume with the same profile"
        )
    before = state.get("profile_rules")
    if rules is not None and before is not None:
        changed = _changed_rules(_measured_rules(before), _measured_rules(rules))
        if changed:
            raise UserError(
                f"{where} was planned with profile {profile!r} as it was then, and the profile has changed since "
                f"({changed}): its trials and new ones would be measured at two budgets; give another --out "
                "(or move this one away), or resume it with the code that planned it"
            )
    return state


def _measured_rules(rules: dict) -> dict:
    """What of a profile's rules decides what its trials measure: not run-only settings (threads), not the
    wording of an exclusion, and a recipe or data setting at its default the same as one left out (a key
    added to the profiles later, such as beam_stop, does not refuse sweeps planned before it)."""

    def kept(values: Optional[dict], cls) -> dict:
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        return {
            k: v for k, v in (values or {}).items() if k not in RUN_ONLY and not (k in defaults and v == defaults[k])
        }

    out = {k: rules.get(k) for k in ("width", "depth_divisor", "steps_factor")}
    out["train"] = kept(rules.get("train"), TrainConfig)
    out["data"] = kept(rules.get("data"), DataConfig)
    out["exclude"] = sorted(rules.get("exclude") or {})
    return json.loads(json.dumps(out))  # as sweep.json holds it: tuples as lists


def _changed_rules(before: dict, now: dict) -> str:
    """'steps_factor 0.006 -> 0.024, train.tokens_per_batch 2048 -> 512' (at most four, then a count); '' if none."""

    def walk(a: dict, b: dict, prefix: str) -> list[str]:
        out = []
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if isinstance(x, dict) and isinstance(y, dict):
                out += walk(x, y, f"{prefix}{key}.")
            elif x != y:
                out.append(f"{prefix}{key} {json.dumps(x)} -> {json.dumps(y)}")
        return out

    out = walk(before, now, "")
    return ", ".join(out[:4]) + (f" and {len(out) - 4} more" if len(out) > 4 else "")


def check_uri_out(store: Storage, where: str) -> None:
    """check_out_dir for a URI: refuse a non-empty location that holds no sweep."""
    from pyarrow import fs

    try:
        infos = store.fs.get_file_info(fs.FileSelector(store.root, allow_not_found=True))
    except OSError:
        return  # check_writable says what is wrong with the location
    names = {i.path.rstrip("/").rsplit("/", 1)[-1] for i in infos}
    if names - {LOCK_NAME} and "sweep.json" not in names:
        raise UserError(
            f"--out {where} is not empty and holds no sweep (no sweep.json): allowed a new or empty location, "
            "or the location of an earlier run of this spec"
        )


def locate(sweep_dir: str | Path, address: Optional[str], tracking_uri: Optional[str]) -> tuple:
    """(Storage or None, the location as messages name it, the driver's own directory), all checked; writes nothing."""
    store = open_storage(str(sweep_dir))
    if store and address and not tracking_uri:
        raise UserError(
            "a sweep stored at a URI on a cluster needs an MLflow server every node reaches: set "
            "tracking.uri in the spec (the default SQLite file would live on this machine only)"
        )
    if store:  # a URI: the driver's own files live in local scratch and are pushed there
        check_uri_out(store, store.uri)
        return store, store.uri, store.scratch / "driver"
    path = Path(sweep_dir).resolve()
    check_out_dir(path, str(sweep_dir))
    return None, str(path), path


def check_out_dir(path: Path, where: str) -> None:
    """Refuse an --out that is a file, the filesystem root, or a non-empty directory holding no sweep."""
    if path.exists() and not path.is_dir():
        raise UserError(f"--out {where} is an existing file: {_OUT_ALLOWED}")
    if path == Path(path.anchor):
        raise UserError(f"--out {where} is the filesystem root: {_OUT_ALLOWED}")
    if path.is_dir() and not (path / "sweep.json").exists():
        if any(p.name != LOCK_NAME for p in path.iterdir()):
            raise UserError(
                f"--out {where} is a non-empty directory that holds no sweep (no sweep.json): {_OUT_ALLOWED}"
            )


def check_inside(sweep_dir: Path, path: Path) -> Path:
    """``path`` resolved, refused unless it lies inside ``sweep_dir``."""
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(Path(sweep_dir).resolve()):
        raise UserError(f"{str(path)!r} resolves outside the sweep directory {str(sweep_dir)!r}: refused")
    return resolved


def _causes(exc: BaseException):
    """``exc`` and what it wraps: ``__cause__``/``__context__``, and ``cause`` of a Ray task error."""
    seen = set()
    while isinstance(exc, BaseException) and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = getattr(exc, "cause", None) or exc.__cause__ or exc.__context__


def root_cause(exc: BaseException) -> BaseException:
    *_, last = _causes(exc)
    return last


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a full disk: ENOSPC, DiskFullError, SQLite's 'disk is full'."""
    for e in _causes(exc):
        if isinstance(e, DiskFullError) or (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)):
            return True
        text = str(e).lower()
        if any(m in text for m in ("no space left on", "database or disk is full", "disk quota exceeded")):
            return True
    return False


def disk_full_at(where) -> bool:
    """Whether the device of ``where`` (a local path) cannot take a small write now: the probe behind an error
    that a full disk caused but does not name (e.g. Tune reading a trial's error file written empty)."""
    probe = Path(str(where))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".space-probe-") as f:
            f.write(b"\0" * 65536)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return False


def no_space_message(where: str, exc: BaseException, resumable: bool = True) -> str:
    """One line: which directory is full, how much is free there now, and what to do."""
    target = getattr(exc, "filename", None) or where
    probe = Path(str(target))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = f"{shutil.disk_usage(probe).free / 2**20:.1f} MiB free there"
    except OSError:
        free = "free space unknown"
    then = "resume with --resume" if resumable else "run it again"
    return (
        f"no space left on the device of {target} ({free}); each running trial needs room for a few "
        f"checkpoints: free space there, then {then} (finished trials are kept)"
    )
