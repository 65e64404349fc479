"""What Ray, Tune, MLflow, SQLAlchemy and Optuna print while ``tsweep run`` drives a sweep goes to the sweep's
``driver.log``, not the terminal (unless --verbose): the terminal shows the live view and, at the end, one line.

The driver's file descriptor 2 is pointed at a file for the whole run, so tracebacks logged by Tune, messages
of Ray's C++ core worker, and MLflow's or SQLAlchemy's errors while closing a sweep on a full disk all land
there.  The file starts outside the sweep (the sweep directory may not exist yet, and a refused second driver
must write nothing into it) and is appended to ``SWEEP/driver.log`` at the end; where that cannot be written
(a full disk) the file is kept where it is, and the last line names whichever holds the messages.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Optional

NAME = "driver.log"


class DriverLog:
    """fd 2 redirected to a file from ``start`` to ``stop``; ``where`` is the file that holds what was written."""

    def __init__(self):
        self.tmp: Optional[Path] = None
        self.where: Optional[Path] = None
        self._saved: Optional[int] = None
        self._handler: Optional[logging.StreamHandler] = None

    def start(self) -> "DriverLog":
        fd, name = tempfile.mkstemp(prefix="tsweep-driver-", suffix=".log")
        self.tmp = Path(name)
        sys.stderr.flush()
        self._saved = os.dup(2)
        os.dup2(fd, 2)
        os.close(fd)
        # our own warnings before the sweep is open (a stale lock taken over) still reach the user
        self._handler = logging.StreamHandler(os.fdopen(os.dup(self._saved), "w", buffering=1))
        self._handler.setLevel(logging.WARNING)
        self._handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))  # as the CLI's own
        self._handler.addFilter(lambda record: record.name.startswith("sweeps.state.lock"))
        logging.getLogger("sweeps.state.lock").addHandler(self._handler)
        return self

    def stop(self, sweep_dir: Optional[Path]) -> Optional[Path]:
        """Point fd 2 back at the terminal; move the messages into ``sweep_dir/driver.log`` (if it is a
        local sweep directory that can take them).  Returns the file that holds them (None: nothing written)."""
        if self._saved is None or self.tmp is None or self._handler is None:  # not started: all three set together
            return self.where
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        logging.getLogger("sweeps.state.lock").removeHandler(self._handler)
        self._handler.stream.close()
        if not self.tmp.stat().st_size:
            self.tmp.unlink()
            return None
        self.where = self.tmp
        if sweep_dir is not None and (Path(sweep_dir) / "sweep.json").exists():
            self._append(Path(sweep_dir) / NAME)
        return self.where

    def _append(self, target: Path) -> None:
        assert self.tmp is not None  # called by stop, after start
        """The messages appended to ``target``: a regular file of the sweep, never through a link (a driver.log
        planted as a link to a file elsewhere keeps its target as it was, and the messages stay in the temporary
        file, which the last line names)."""
        try:
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError:  # a link, a FIFO without a reader, a full disk
            return
        with os.fdopen(fd, "ab", buffering=0) as dst:  # unbuffered: nothing left to write when it closes
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return
            try:
                with open(self.tmp, "rb") as src:
                    shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(fd)
            except OSError:  # a full disk: the messages stay in the temporary file, which the line names
                _truncate(fd, info.st_size)
                return
        self.tmp.unlink()
        self.where = target


def _truncate(fd: int, size: int) -> None:
    """Take back a partial append (the earlier sessions' messages stay)."""
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass
