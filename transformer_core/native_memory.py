"""What a trial's process holds outside Python: the native libraries' caches, freed memory glibc keeps, and the
peak resident memory of one trial (per trial, not per process, so that a reused worker reports each trial's own).

On a CPU with AVX512-BF16, bf16 matrix products run through oneDNN, and every new operand shape builds a
primitive that two caches keep: oneDNN's own (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, 1024 by default) and the
one of ideep, PyTorch's wrapper around it (``LRU_CACHE_CAPACITY``, also 1024).  Length-bucketed batches give a
new shape almost every step, and each cached primitive holds about half a megabyte (scratch buffers and
reordered operands), so a bf16 trial's memory grew with every shape it met while an fp32 one (MKL, no cache)
stayed flat; a reused worker carried the caches from trial to trial.  ``bound_caches`` sets both capacities
before the first primitive is built (they are read once, at the first one): ``CACHE_CAPACITY`` holds the
distinct shapes of a step, forward and backward, so a step's repeated shapes still hit.  A user's own setting
of either variable is kept.  benchmarks/worker_memory.py measures both precisions with the libraries' defaults
and with these bounds, trial after trial in one process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Optional

CACHE_CAPACITY = 64
CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_caches(capacity: int = CACHE_CAPACITY) -> dict:
    """Set the native primitive caches' capacities where the user has not: {variable: value in force}.  Must
    run before the process's first oneDNN primitive (transformer_core's import does it)."""
    for name in CACHE_VARIABLES:
        os.environ.setdefault(name, str(capacity))
    return {name: os.environ[name] for name in CACHE_VARIABLES}


_libc: Optional[ctypes.CDLL] = None


def _glibc() -> Optional[ctypes.CDLL]:
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            lib.malloc_trim  # noqa: B018 - glibc only (musl, macOS have none)
            _libc = lib
        except (OSError, AttributeError):
            _libc = False  # type: ignore[assignment]
    return _libc or None


def release_free_memory() -> bool:
    """Give the memory the allocator holds free back to the system (glibc's malloc_trim): after a trial, so that
    a reused worker starts the next one from what it really uses.  False where there is no glibc."""
    import gc

    gc.collect()
    lib = _glibc()
    if lib is None:
        return False
    lib.malloc_trim(0)
    return True


def _status(field: str) -> Optional[int]:
    """A field of /proc/self/status in bytes (Linux), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def resident_bytes() -> Optional[int]:
    """This process's resident memory now (Linux), or None."""
    return _status("VmRSS")


def reset_peak() -> bool:
    """Start counting this process's peak resident memory afresh (Linux: clear_refs 5 resets VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes() -> Optional[int]:
    """The process's peak resident memory since ``reset_peak`` (or since it started), in bytes: VmHWM on
    Linux, else getrusage's lifetime peak."""
    peak = _status("VmHWM")
    if peak is not None:
        return peak
    try:
        import resource
        import sys

        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kilobytes elsewhere
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    except (ImportError, OSError):
        return None


def gb(n: Optional[int]) -> Optional[float]:
    return None if n is None else round(n / 1e9, 3)
