"""A reused worker's memory kept bounded: after each trial the worker gives its free memory back and measures
what it still holds; above a bound derived from its machine's memory and the trials that share that machine it
asks the driver to replace it (a fresh process for the slot's next trial) instead of running another trial.

The bound is ``WORKER_SHARE`` of the machine's memory over the trials that run on it at once (the spec's
max_concurrent, at most the machine's CPUs over each trial's CPUs): on 23.5 GB and two trials at once, 5.9 GB
per worker, where Ray's memory monitor kills at 95% of the machine.  ``TSWEEP_WORKER_MEMORY`` (GB) sets it.

No Ray here: tune_adapter.py reports ``after_trial``'s keys with the trial's last result, and the driver's side
(``keep_worker``) reads them back.
"""

from __future__ import annotations

import os
from typing import Optional

from transformer_core.errors import UserError
from transformer_core.native_memory import gb, release_free_memory, resident_bytes

WORKER_SHARE = 0.5
REPLACE_KEY = "tsweep_replace_worker"


def machine_memory() -> Optional[int]:
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def worker_bound(max_concurrent: int, cpus_per_trial: float = 1.0, memory: Optional[int] = None) -> Optional[int]:
    """Bytes a reused worker may hold after a trial before it is replaced (None: no bound known)."""
    value = os.environ.get("TSWEEP_WORKER_MEMORY")
    if value:
        try:
            bound = float(value)
        except ValueError:
            bound = -1.0
        if not bound > 0:
            raise UserError(f"TSWEEP_WORKER_MEMORY={value!r} is invalid: allowed a positive number of GB (e.g. 6)")
        return int(bound * 1e9)
    memory = memory or machine_memory()
    if not memory:
        return None
    here = max(1, int((os.cpu_count() or 1) // max(cpus_per_trial, 1e-9)))
    return int(WORKER_SHARE * memory / max(1, min(max_concurrent, here)))


def after_trial(max_concurrent: int, cpus_per_trial: float = 1.0) -> dict:
    """In the worker, after a trial: free memory given back, what the worker holds now, and whether it is to be
    replaced rather than run another trial."""
    release_free_memory()
    held, bound = resident_bytes(), worker_bound(max_concurrent, cpus_per_trial)
    over = held is not None and bound is not None and held > bound
    return {"worker_rss_gb": gb(held), "worker_bound_gb": gb(bound), REPLACE_KEY: bool(over)}


def keep_worker(last_result: Optional[dict]) -> bool:
    """On the driver: whether the worker that reported ``last_result`` may run another trial."""
    return not (last_result or {}).get(REPLACE_KEY)


def bounded_reuse_installed() -> bool:
    """Install, once, the driver-side check that replaces a worker over its bound (Tune keeps a finished
    trial's worker for the next trial in ``TuneController._maybe_cache_trial_actor``; a worker over its bound is
    not kept, so Tune ends it and starts a fresh one).  False where this Ray has no such method: reuse is then
    left off, as it cannot be bounded."""
    try:
        from ray.tune.execution.tune_controller import TuneController
    except ImportError:
        return False
    original = getattr(TuneController, "_maybe_cache_trial_actor", None)
    if original is None:
        return False
    if getattr(original, "_tsweep_bounded", False):
        return True

    def maybe_cache(self, trial) -> bool:
        if not keep_worker(getattr(trial, "last_result", None)):
            return False  # the caller ends the worker; the slot's next trial gets a fresh process
        return original(self, trial)

    maybe_cache._tsweep_bounded = True  # type: ignore[attr-defined]
    TuneController._maybe_cache_trial_actor = maybe_cache
    return True
