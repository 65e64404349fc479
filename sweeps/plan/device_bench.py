"""A device's training rate, measured: a short base-row training run at a profile, only its optimiser steps timed
(after untimed warm-up steps, no evaluation, no checkpoint), in windows with the device synchronised at both ends
of each; the median window's rate is the result, as model FLOPs (6 x parameters x target tokens / seconds).
`tsweep bench-device` (sweeps/cli/bench.py) runs and stores it; benchmarks time their candidates with the same
windows."""

from __future__ import annotations

import math
import platform
import tempfile
import time
from pathlib import Path

from transformer_core.errors import UserError


class DivergedError(UserError):
    """The measured training run diverged: its rate would count steps that trained nothing."""


class MeasurementError(UserError):
    """A measurement that cannot be what it claims (k trials sharing a device above k times one alone)."""


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"


def _device_memory_gb(device) -> float | None:
    """The device's memory in GiB (CUDA), None elsewhere."""
    import torch

    return torch.cuda.get_device_properties(device).total_memory / 2**30 if device.type == "cuda" else None


def timed_windows(
    tr, warmup: int, steps: int, windows: int = 1, ready=None
) -> tuple[float, list[tuple[float, float, int]]]:
    """``warmup`` untimed steps of the Trainer ``tr``, then ``windows`` windows of ``steps`` timed steps:
    (the warm-up's seconds, [(target tokens/s, seconds, target tokens)] per window).  ``ready``: called between
    the two (trials sharing a device wait there for each other)."""
    from transformer_core.trainer import is_log_step

    def step() -> None:
        loss, _, _ = tr.train_step()
        why = None if math.isfinite(loss) else f"non-finite training loss at step {tr.step}"
        if getattr(tr, "lazy", False):  # loss_sync=window: nan until read, at the window's end as a run reads it
            why = tr.settle()[2] if is_log_step(tr.step, tr.cfg.train) else None
        if why:  # a rate of steps that trained nothing is no measurement
            raise DivergedError(f"the measured run diverged ({why}): no rate from it; measure settings that train")

    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(tr.device)
    warm, out = time.perf_counter() - t0, []
    if ready is not None:
        ready()
    for _ in range(windows):
        tokens0, t0 = tr.tokens, time.perf_counter()
        for _ in range(steps):
            step()
        _sync(tr.device)
        seconds = time.perf_counter() - t0
        out.append(((tr.tokens - tokens0) / seconds, seconds, tr.tokens - tokens0))
    return warm, out


def measure(
    profile: str, corpus: str, steps: int, warmup: int, data_dir, overrides: dict, windows: int = 1, ready=None,
    preset: str = "base",
) -> dict:  # fmt: skip
    """Train ``preset`` (the base row, or big) at ``profile`` for warmup + windows x steps optimiser steps; the
    median window's rate."""
    import torch

    from sweeps.spec.profiles import profile_values
    from transformer_core.run_config import make_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer

    from .estimate import KNOWN_DEVICES, match_device, model_identity, step_settings

    values = {**profile_values(preset, profile), "corpus": corpus, **overrides, "steps": warmup + windows * steps}
    if data_dir:
        values["data_dir"] = str(data_dir)
    config = make_run_config(values)
    with tempfile.TemporaryDirectory(prefix="tsweep-bench-") as work:
        tr = Trainer(config, Path(work), JsonTracker(Path(work) / "tracking.jsonl"), None)
        warm, rates = timed_windows(tr, warmup, steps, windows, ready)
    _, seconds, tokens = sorted(rates)[(len(rates) - 1) // 2]
    flops = 6.0 * tr.params * tokens / seconds
    name = _device_name(tr.device)
    record = {
        "profile": profile,
        "device": name,
        "precision": tr.precision,
        "flops_per_second": flops,
        "tokens_per_second": tokens / seconds,
        "seconds_per_step": seconds / steps,
        "steps": steps,
        "windows": [round(r[0], 1) for r in rates],  # target tokens/s of each window; the median is the result
        "warmup_steps": warmup,
        "warmup_seconds": warm,
        "compile": tr.forward_loss.mode,
        "compile_seconds": tr.compile_seconds,
        "loss_kernel": tr.forward_loss.loss_kernel,
        "packing": tr.packing or "off",
        "peak_cuda_gb": torch.cuda.max_memory_allocated(tr.device) / 2**30 if tr.device.type == "cuda" else None,
        "device_memory_gb": _device_memory_gb(tr.device),
        "fused_adam": config.train.fused_adam,
        "params": tr.params,
        "tokens_per_step": tokens / steps,
        "budget_per_step": config.train.tokens_per_batch * config.train.accumulate,
        "settings": step_settings(config.train),  # what `tsweep plan` checks a spec's trials against
        "model": model_identity(config),  # which trials take this rate as their own model's (estimate.rate_for)
        "corpus": corpus,
        "torch": torch.__version__,
        "host": platform.node(),
        "measured_at": time.time(),
    }
    key = match_device(name) if tr.device.type == "cuda" else None
    if key:
        full, bf16, fp32 = KNOWN_DEVICES[key]
        peak = bf16 if tr.precision == "bf16" and bf16 else fp32
        record.update(peak_flops_per_second=peak, mfu=flops / peak)
    return record


def _shared_worker(barrier, queue, what: dict) -> None:
    """One of k trials sharing the device: its record on ``queue`` (or the error, in one line)."""
    try:
        queue.put(measure(**what, ready=barrier.wait))
    except Exception as exc:  # the parent names it; a worker's traceback would be the whole message
        barrier.abort()
        queue.put(f"{type(exc).__name__}: {exc}")


def sharing_factor(k: int, together: float, alone: float) -> float:
    """What k trials sharing a device trained together over one alone; a MeasurementError where it is more than
    `tsweep plan` takes from k trials (estimate.SHARING_SLACK x k: a timing went wrong), so that no factor is stored
    that would make the data file refused."""
    from .estimate import SHARING_SLACK

    factor = together / alone
    if not factor <= SHARING_SLACK * k:
        raise MeasurementError(
            f"{k} trials sharing the device trained {factor:.2f}x one trial alone, more than {k} trials can: a "
            f"timing went wrong (alone {alone:,.0f} tokens/s, together {together:,.0f}); no sharing factor was stored "
            "(the single trial's measurement was): measure again"
        )
    return factor


def measure_sharing(k: int, what: dict, alone: dict) -> dict:
    """k processes of the same base-row measurement on this device at once, their timed windows started together:
    the tokens/s they train together, each one's, and the factor over ``alone`` (one trial's record)."""
    import multiprocessing as mp
    import os

    ctx = mp.get_context("spawn")  # a fresh CUDA context per trial, as Ray's workers have
    barrier, queue = ctx.Barrier(k), ctx.Queue()
    procs = [ctx.Process(target=_shared_worker, args=(barrier, queue, what)) for _ in range(k)]
    for p in procs:
        p.start()
    found = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    errors = [f for f in found if isinstance(f, str)]
    if errors:
        raise RuntimeError(f"a trial sharing the device failed: {errors[0]}")
    together = sum(r["tokens_per_second"] for r in found)
    return {
        "factor": sharing_factor(k, together, alone["tokens_per_second"]),
        "tokens_per_second": together,
        "per_trial": [round(r["tokens_per_second"], 1) for r in found],
        "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
        "peak_cuda_gb": max((r.get("peak_cuda_gb") or 0.0) for r in found) or None,
    }
