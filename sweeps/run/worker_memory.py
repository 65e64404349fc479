"""A reused worker's memory kept bounded: after each trial the worker gives its free memory back and measures
what it still holds; above a bound derived from its machine's memory and the trials that share that machine it
asks the driver to replace it (a fresh process for the slot's next trial) instead of running another trial.

The bound is ``WORKER_SHARE`` of the machine's memory over the trials that run on it at once (the spec's
max_concurrent, at most the machine's CPUs over each trial's CPUs): on 23.5 GB and two trials at once, 5.9 GB
per worker, where Ray's memory monitor kills at 95% of the machine.  ``TSWEEP_WORKER_MEMORY`` (GB) sets it.

Before a sweep starts, ``fit_concurrency`` compares its largest row's memory (measured: the peak resident memory
its finished trials recorded in result.json; else the knobs' lower bound plus a worker's own footprint) times the
trials run at once with the machine's memory, and lowers the concurrency where they would not fit.

No Ray here: tune_adapter.py reports ``after_trial``'s keys with the trial's last result, and the driver's side
(``keep_worker``) reads them back.
"""

from __future__ import annotations

import math
import os
from typing import Optional

from transformer_core.errors import UserError
from transformer_core.memory import machine_memory
from transformer_core.native_memory import gb, release_free_memory, resident_bytes
from transformer_core.rundir import loads

WORKER_SHARE = 0.5
REPLACE_KEY = "tsweep_replace_worker"


MEMORY_ENV = "TSWEEP_WORKER_MEMORY"
LEAST_GB, MOST_GB = 0.001, 1e6  # 1 MB (every worker is over it: replaced after each trial) to 1 PB


def env_worker_bound() -> Optional[int]:
    """The bytes ``TSWEEP_WORKER_MEMORY`` (GB) sets (None where it is unset or empty); any other value than a
    number of GB from LEAST_GB to MOST_GB is a UserError.  The driver checks it before Ray starts
    (runner.open_sweep), so that a trial's worker never finds it invalid after training."""
    value = os.environ.get(MEMORY_ENV)
    if not value:
        return None
    try:
        bound = float(value)
    except ValueError:
        bound = math.nan
    if not LEAST_GB <= bound <= MOST_GB:  # nan, inf, 0, negative and 1e-30 all fail this
        raise UserError(
            f"{MEMORY_ENV}={value!r} is invalid: allowed a number of GB from {LEAST_GB:g} to {MOST_GB:g} (e.g. 6), "
            "or unset for half the machine's memory over the trials at once"
        )
    return int(bound * 1e9)


def worker_bound(max_concurrent: int, cpus_per_trial: float = 1.0, memory: Optional[int] = None) -> Optional[int]:
    """Bytes a reused worker may hold after a trial before it is replaced (None: no bound known)."""
    given = env_worker_bound()
    if given is not None:
        return given
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
    TuneController._maybe_cache_trial_actor = maybe_cache  # type: ignore[method-assign]  # the patch itself
    return True


WORKER_FOOTPRINT = 1.0e9
"""A trial worker's memory beyond its model, used where no trial of the row has been measured yet: the Python
process with torch, MLflow and Ray's worker imported, the corpus and a cpu-profile trial's activations (0.7-0.8 GB
peak measured by benchmarks/worker_memory.py, bf16 and fp32)."""
FIT_SHARE = 0.8  # of the machine's memory that the trials at once may take (Ray's monitor kills at 95%)


def measured_peaks(sweep_dir) -> dict:
    """{row: largest peak resident memory (bytes) its trials recorded in result.json} of a sweep directory."""
    from pathlib import Path

    out: dict = {}
    for path in sorted(Path(sweep_dir).glob("trials/*/result.json")):
        try:
            result = loads(path.read_text())
            trial = loads((path.parent / "trial.json").read_text())
            peak = float(result["peak_rss_gb"]) * 1e9
        except (OSError, ValueError, KeyError, TypeError):
            continue
        row = trial.get("row") if isinstance(trial, dict) else None
        if isinstance(row, str) and peak > 0:
            out[row] = max(out.get(row, 0.0), peak)
    return out


def fit_concurrency(trials: list, max_concurrent: int, measured: dict, memory: Optional[int] = None
                    ) -> tuple[int, Optional[str]]:  # fmt: skip
    """(trials to run at once, a line saying why it was lowered or None) for ``trials`` (sweeps.spec.sweep_spec.Trial)
    on a machine of ``memory`` bytes, from each row's ``measured`` peak (else an estimate)."""
    from transformer_core.memory import human_bytes, training_bytes

    memory = memory or machine_memory()
    if not memory or not trials or max_concurrent <= 1:
        return max_concurrent, None
    need, largest, how = 0.0, None, "estimated"
    for t in {t.row: t for t in trials}.values():  # a row's seeds hold the same memory: one estimate per row
        if t.row in measured:
            value, source = measured[t.row], "measured"
        else:
            value, source = training_bytes(t.config)[0] + WORKER_FOOTPRINT, "estimated"
        if value > need:
            need, largest, how = value, t.row, source
    fits = max(1, int(FIT_SHARE * memory // max(need, 1.0)))
    if fits >= max_concurrent:
        return max_concurrent, None
    return fits, (
        f"max_concurrent {max_concurrent} -> {fits}: the largest row ({largest}) holds {human_bytes(need)} "
        f"({how}), and {max_concurrent} at once would pass {FIT_SHARE:.0%} of this machine's {human_bytes(memory)}"
    )
