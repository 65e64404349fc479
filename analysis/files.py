"""Files read from a sweep directory, which anyone may have written into: regular files only, of a bounded size.

A FIFO planted as metrics.jsonl would block the command that reads it for ever, a link to /dev/zero would fill
its memory; ``read_text`` refuses both (``Unreadable``, an OSError) before reading a byte.  No pandas here: the
checks of ``tsweep run`` import it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

STATE_BYTES = 64 << 20  # sweep.json, trial.json, result.json, attempts.jsonl: KB to a few MB
METRICS_BYTES = 1 << 30  # metrics.jsonl: a million lines is about 100 MB


class Unreadable(OSError):
    """A file the analysis does not read: not a regular file (a FIFO, /dev/zero), or larger than its limit."""


def read_text(path: Path, limit: int = STATE_BYTES) -> str:
    """The text of a regular file of at most ``limit`` bytes (bytes that are not UTF-8 replaced); Unreadable
    where it is something else, OSError where it cannot be read: a file planted in a sweep neither blocks nor
    fills the memory of the command that reads it."""
    with open(path, "rb", buffering=0, opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{path} is not a regular file")
        if info.st_size > limit:
            raise Unreadable(f"{path} is larger than {limit:,} bytes")
        return f.read(limit + 1)[:limit].decode("utf-8", errors="replace")
