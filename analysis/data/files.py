"""Files read from a sweep directory, which anyone may have written into: regular files only, of a bounded size;
and report folders written whole.

A FIFO planted as metrics.jsonl would block the command that reads it for ever, a link to /dev/zero would fill
its memory; ``read_text`` refuses both (``Unreadable``, an OSError) before reading a byte.  ``whole_folder``
gives a report's writers a temporary sibling folder and swaps it in for the report folder once every file is
written, so an interrupted report leaves the previous one as it was.  No pandas here: the checks of ``tsweep run``
import it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformer_core.errors import UserError
from transformer_core.rundir import loads

STATE_BYTES = 64 << 20  # sweep.json, trial.json, result.json, attempts.jsonl: KB to a few MB
METRICS_BYTES = 1 << 30  # metrics.jsonl: a million lines is about 100 MB


class Unreadable(OSError):
    """A file the analysis does not read: not a regular file (a FIFO, /dev/zero), or larger than its limit."""


# inside ``read_once()``: {(path, limit): its text, or the OSError its read raised}
_READ: dict[tuple[str, int], str | OSError] | None = None


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Within it, each file is read once: a later ``read_text`` of the same path gets the first read's text (or
    its error again).  A report reads every run's files once, and sees one state of a sweep that is still running."""
    global _READ
    outer = _READ
    _READ = {} if outer is None else outer
    try:
        yield
    finally:
        _READ = outer


def read_text(path: Path, limit: int = STATE_BYTES) -> str:
    """The text of a regular file of at most ``limit`` bytes (bytes that are not UTF-8 replaced); Unreadable
    where it is something else, OSError where it cannot be read: a file planted in a sweep neither blocks nor
    fills the memory of the command that reads it."""
    if _READ is None:
        return _read_text(path, limit)
    key = (os.path.abspath(path), limit)
    if key not in _READ:
        try:
            _READ[key] = _read_text(path, limit)
        except OSError as exc:
            _READ[key] = exc
    got = _READ[key]
    if isinstance(got, OSError):
        raise got
    return got


def read_json(path: Path, limit: int = STATE_BYTES) -> Any:
    """The JSON value of ``read_text(path, limit)``: OSError where it cannot be read (``read_text``), ValueError
    where it is not JSON, a document nested too deeply included (``transformer_core.rundir.loads``)."""
    return loads(read_text(path, limit))


def _read_text(path: Path, limit: int) -> str:
    with open(path, "rb", buffering=0, opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{path} is not a regular file")
        if info.st_size > limit:
            raise Unreadable(f"{path} is larger than {limit:,} bytes")
        return f.read(limit + 1)[:limit].decode("utf-8", errors="replace")


# what the reports write into their folder (analysis.report.writers, analysis.report.search_report,
# analysis.report.rule_changes), and the folder metadata a file browser leaves (.DS_Store)
REPORT_FILE = re.compile(
    r"(report\.(md|html)|table\.(csv|tex)|claims(-[A-Za-z0-9_.-]+)?\.csv|(seeds|versus-base|evalsets|trials|"
    r"configurations|expected-best|importance)\.csv|rule_changes\.md|[A-Za-z0-9_-]+\.png|plotly\.min\.js|"
    r"\.DS_Store)\Z"
)
_LEFTOVER_SECONDS = 3600  # a temporary folder this old beside the report is an interrupted report's (SIGKILL)


def check_replaceable(out: Path) -> None:
    """Refuse, in one line, a report folder that is not a folder or that holds what no report writes (an --out
    naming a folder of other files): swapping it for the new report would delete them."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise UserError(f"{str(out)!r} is not a folder: allowed a new folder, an empty one or an earlier report's")
    if not os.access(out, os.W_OK):  # made read-only to keep it: not replaced behind the user's back
        raise UserError(f"{str(out)!r} is read-only: allowed a writable folder (chmod u+w), or another --out")
    other = sorted(p.name for p in out.iterdir() if not (REPORT_FILE.match(p.name) and p.is_file()))
    if other:
        shown = ", ".join(repr(n) for n in other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise UserError(
            f"{str(out)!r} holds {shown}, which no report writes: a report replaces its whole folder; allowed a new "
            "folder, an empty one or an earlier report's (move the others out)"
        )


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux's renameat2 RENAME_EXCHANGE); False where the system or
    the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _remove_leftovers(out: Path) -> None:
    """Temporary folders that interrupted reports (SIGKILL) left beside ``out`` more than an hour ago."""
    now = time.time()
    for path in out.parent.glob(f".{out.name}.*-tmp"):
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink() and now - path.stat().st_mtime > _LEFTOVER_SECONDS:
                shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def whole_folder(out: Path) -> Iterator[Path]:
    """A temporary folder beside ``out`` to write a report into; once the block ends without an error it replaces
    ``out`` in one step (the previous report's folder removed after), and on an error or an interrupt it is
    removed and ``out`` stays as it was.  ``out`` must be new, empty or hold only report files
    (``REPORT_FILE``); a UserError says so otherwise, before anything is written."""
    out = Path(out)
    check_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", suffix="-tmp", dir=out.parent))
    except OSError as exc:  # a read-only sweep or --out parent, a full disk
        raise UserError(f"cannot write a report beside {str(out)!r} ({exc.strerror or exc}): allowed a folder whose "
                        "parent is writable") from None  # fmt: skip
    _remove_leftovers(out)
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would make the report unreadable to others
        if not out.is_dir():
            os.rename(tmp, out)
        elif _exchange(tmp, out):  # tmp now holds the previous report
            shutil.rmtree(tmp, ignore_errors=True)
        else:  # no atomic exchange here: the previous folder moved aside, the new one renamed in, the old removed
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", suffix="-tmp", dir=out.parent))
            os.rename(out, old / out.name)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            kept = "the previous report is kept" if out.is_dir() else "no report was written"
            raise UserError(f"no space left to write the report {str(out)!r} ({exc.strerror}): {kept}; allowed "
                            "once space is freed") from None  # fmt: skip
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
