"""One driver at a time on a sweep: ``SweepLock``, the ``tsweep run`` driver's exclusive lock.

On a local path it is ``fcntl.flock`` on ``DIR/sweep.lock``, whose JSON body (pid, host, time) names the holder in
a second driver's message; the kernel drops the lock when its driver dies, and a body left by a dead driver is
taken over with a warning.  At a URI it is a ``sweep.lock`` object (best effort: object stores offer no atomic
create through pyarrow).

What a sweep checks before it writes (sweep.json, --out) lives in ``sweeps.state.sweep_state``; how a full disk is
recognised and reported, in ``sweeps.state.diskfull``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import stat
import time
import uuid
from pathlib import Path
from typing import Optional

from transformer_core.errors import UserError
from transformer_core.rundir import loads

from .sweep_state import LOCK_NAME

log = logging.getLogger(__name__)  # sweeps.run.driverlog copies this logger's records into the driver's log


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
        body = loads(text) if text.strip() else {}
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
        if store is not None:
            return cls._acquire_remote(where, store)
        if sweep_dir is None:
            raise TypeError("SweepLock.acquire: give sweep_dir (a local sweep) or store (a URI)")
        return cls._acquire_local(where, Path(sweep_dir))

    @classmethod
    def _acquire_local(cls, where: str, sweep_dir: Path) -> "SweepLock":
        try:
            sweep_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the sweep directory {where}: {exc.strerror or exc}") from None
        try:  # never through a link: the lock's body is written, and must not land in a file outside the sweep
            fd = os.open(sweep_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise UserError(f"cannot open the lock {sweep_dir / LOCK_NAME}: {exc.strerror or exc} (allowed: a regular "
                            "file, or none; remove what is there)") from None  # fmt: skip
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UserError(f"the lock {sweep_dir / LOCK_NAME} is not a regular file: remove it and run again")
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
