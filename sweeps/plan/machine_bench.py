"""The step time of a profile's base row on this machine, measured as a sweep would run it, and cached.

A few seconds of real training of the base trial's model on its corpus (the same config a sweep runs:
batches of the profile's shape, its threads and precision), by as many trials side by side as the sweep
runs at once, since trials that share the cores' caches and memory bandwidth each train slower than one
alone.  The result is kept in the data directory's device-bench.json (sweeps.plan.estimate, under "machines"),
keyed by what decides it: the profile and corpus, the CPU's model, flags and the instruction set torch uses
(ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA), torch's version, precision, threads, trials side by side and the
other run-only knobs the trial sets (torch.compile, fused Adam).
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Optional

from transformer_core.knobs import KNOBS

from .estimate import Throughput, bench_path, read_machine_measurements, store_machine_measurement

log = logging.getLogger(__name__)
SECONDS = 4.0  # timed training per trial
_IN_KEY = ("device", "precision", "threads", "data_dir", "log_every")  # run knobs keyed apart, or not speed
WARMUP = 10  # untimed steps first (allocator, first calls of each batch shape)


def _cpu() -> tuple[str, str]:
    """(model name, digest of the flags) of this CPU, from /proc/cpuinfo where there is one."""
    name, flags = platform.processor() or platform.machine(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name in ("", platform.machine(), platform.processor()):
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = " ".join(sorted(value.split()))
    except OSError:
        pass
    return name, hashlib.sha256(flags.encode()).hexdigest()[:12] if flags else "unknown"


def machine_key(values: dict, profile: str, side_by_side: int) -> tuple[str, dict]:
    """The key of a measurement of the trial ``values`` (flat run keys) at ``profile`` on this machine, and its
    parts."""
    import torch

    from transformer_core.device import resolve_device, resolve_precision

    device = resolve_device(values.get("device", "auto"))
    cpu, flags = _cpu()
    parts = {
        "profile": profile,
        "corpus": values.get("corpus", ""),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu,
        "cpu_flags": flags,
        "isa": torch.backends.cpu.get_cpu_capability(),
        "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
        "torch": torch.__version__,
        "precision": resolve_precision(values.get("precision", "auto"), device),
        "threads": int(values.get("threads") or torch.get_num_threads()),
        "side_by_side": side_by_side,
        # how a step runs beyond those (torch.compile, fused Adam, ...): the run-only knobs the trial sets
        "run": ",".join(
            f"{k.name}={values[k.name]}"
            for k in KNOBS
            if k.where == "run" and k.name in values and k.name not in _IN_KEY
        ),
    }
    return "|".join(f"{k}={v}" for k, v in parts.items()), parts


def _one_trial(values: dict, seconds: float, warmup: int, barrier, queue) -> None:
    """A child process: build the trial's trainer, warm up, wait for the others, train ``seconds``."""
    try:
        from transformer_core.run_config import make_run_config
        from transformer_core.tracking import JsonTracker
        from transformer_core.trainer import Trainer

        config = make_run_config(values)
        with tempfile.TemporaryDirectory(prefix="tsweep-step-") as work:
            tr = Trainer(config, Path(work), JsonTracker(Path(work) / "tracking.jsonl"), None)
            for _ in range(warmup):
                tr.train_step()
            barrier.wait(timeout=600)
            tokens0, steps, t0 = tr.tokens, 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                tr.train_step()
                steps += 1
            elapsed = time.perf_counter() - t0
        queue.put({"steps": steps, "seconds": elapsed, "tokens": tr.tokens - tokens0, "params": tr.params,
                   "precision": tr.precision})  # fmt: skip
    except BaseException as exc:  # the parent reports it in one line
        barrier.abort()
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def _results(procs: list, queue, limit: float = 900.0) -> list[dict]:
    """One result per process; a process that died without one (killed, out of memory) is an error."""
    import queue as queues

    runs: list[dict] = []
    deadline = time.time() + limit
    while len(runs) < len(procs) and time.time() < deadline:
        try:
            runs.append(queue.get(timeout=1.0))
        except queues.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                return runs + [{"error": f"a measuring process ended with exit code {dead[0]}"}]
    return runs if len(runs) == len(procs) else runs + [{"error": f"no result within {limit:.0f} s"}]


def measure(values: dict, side_by_side: int, seconds: float = SECONDS, warmup: int = WARMUP) -> dict:
    """Train the trial ``values`` in ``side_by_side`` processes at once; the per-trial figures, averaged."""
    from transformer_core.errors import UserError
    from transformer_core.run_config import make_run_config
    from transformer_core.trainer import task_for

    config = make_run_config(values)
    task_for(config).corpus(config)  # prepared once here, not by every child at once
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(side_by_side), ctx.Queue()
    procs = [
        ctx.Process(target=_one_trial, args=(values, seconds, warmup, barrier, queue)) for _ in range(side_by_side)
    ]
    for p in procs:
        p.start()
    try:
        runs = _results(procs, queue)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    failed = [r["error"] for r in runs if "error" in r]
    if failed:
        raise UserError(f"measuring the base row's step time failed: {failed[0]}")
    tokens_per_second = sum(r["tokens"] / r["seconds"] for r in runs) / len(runs)
    return {
        "seconds_per_step": sum(r["seconds"] / r["steps"] for r in runs) / len(runs),
        "tokens_per_second": tokens_per_second,
        "flops_per_second": 6.0 * runs[0]["params"] * tokens_per_second,
        "params": runs[0]["params"],
        "steps": sum(r["steps"] for r in runs),
        "timed_seconds": seconds,
        "measured_at": time.time(),
        "host": platform.node(),
    }


def side_by_side(spec) -> int:
    """How many trials of ``spec`` run at once on this machine: its max_concurrent, at most the CPUs' share."""
    cpus = max(1, int(spec.resources.cpus or 1))
    return max(1, min(spec.max_concurrent, (os.cpu_count() or 1) // cpus))


def step_throughput(
    spec, profile: str, base_values: dict, data_dir, measure_if_missing: bool = True, remeasure: bool = False
) -> Optional[Throughput]:
    """This machine's per-trial training FLOP/s for the base trial ``base_values`` of ``spec`` at ``profile``:
    cached, else (or with ``remeasure``) measured now; None where it is not cached and ``measure_if_missing``
    is false."""
    n = side_by_side(spec)
    values = {**base_values, "data_dir": str(data_dir)} if data_dir else dict(base_values)
    key, parts = machine_key(values, profile, n)
    record = read_machine_measurements(data_dir).get(key) if data_dir and not remeasure else None
    fresh = record is None
    if record is None:
        if not measure_if_missing:
            return None
        log.info("measuring the base row's step time on this machine (%d trial(s) side by side)", n)
        record = {**parts, **measure(values, n)}
        if data_dir:
            store_machine_measurement(data_dir, key, record)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record["measured_at"]))
    return Throughput(
        float(record["flops_per_second"]),
        f"{'measured now' if fresh else 'measured'} on this machine ({parts['device']}, {parts['isa']},"
        f" {parts['precision']}, {parts['threads']} thread(s)): the base row at profile {parts['profile']!r},"
        f" {n} trial(s) side by side, {record['seconds_per_step'] * 1000:.0f} ms per step,"
        f" {record['tokens_per_second']:,.0f} target tokens/s per trial ({when}"
        + (f"; cached in {bench_path(data_dir)})" if data_dir else ")"),
    )
