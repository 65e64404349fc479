"""A full disk, recognised and said in one line: in what an exception wraps, or by probing a directory."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from transformer_core.rundir import DiskFullError


def _causes(exc: Optional[BaseException]):
    """``exc`` and what it wraps: ``__cause__``/``__context__``, and ``cause`` of a Ray task error."""
    seen = set()
    while isinstance(exc, BaseException) and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = getattr(exc, "cause", None) or exc.__cause__ or exc.__context__


def root_cause(exc: BaseException) -> BaseException:
    """The innermost error ``exc`` wraps (``exc`` itself when it wraps nothing)."""
    last = exc
    for last in _causes(exc):  # noqa: B007 - the loop's last value is the answer
        pass
    return last


_OOM = re.compile(r"memory used[=:]\s*([0-9.]+)\s*([KMGT]i?B)", re.IGNORECASE)


def out_of_memory(text: str) -> Optional[str]:
    """'killed: out of memory at 10.6 GB' where ``text`` is Ray's memory monitor killing a worker (its
    OutOfMemoryError), else None."""
    text = str(text or "")
    if not any(m in text for m in ("OutOfMemoryError", "running low on memory", "memory pressure (OOM)")):
        return None
    m = _OOM.search(text)
    if not m:
        return "killed: out of memory (Ray's memory monitor)"
    scale = {"K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}[m.group(2)[0].upper()]
    return f"killed: out of memory at {float(m.group(1)) * scale:.1f} GB"


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
