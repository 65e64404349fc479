"""`tsweep bench-device`: a short base-row training run on this machine's device; its FLOP/s feed `tsweep plan`.

Only optimiser steps are timed (after a few warm-up steps; no evaluation, no checkpoint), in windows of
``--steps`` steps with the device synchronised at both ends of each; the median window's rate (of an even number
of windows, the slower middle one) is the result, as model FLOPs: 6 x parameters x target tokens / seconds.  (A
compiled step can recompile for a batch shape it meets late, a minute on a GPU: that lands in one window, which
the median leaves out; a trial pays it once.)  The result is stored in the data
directory (device-bench.json, by profile), where `tsweep plan --profile P` finds it.
"""

from __future__ import annotations

import platform
import tempfile
import time
from pathlib import Path


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"


def timed_windows(
    tr, warmup: int, steps: int, windows: int = 1, ready=None
) -> tuple[float, list[tuple[float, float, int]]]:
    """``warmup`` untimed steps of the Trainer ``tr``, then ``windows`` windows of ``steps`` timed steps:
    (the warm-up's seconds, [(target tokens/s, seconds, target tokens)] per window).  ``ready``: called between
    the two (trials sharing a device wait there for each other)."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        tr.train_step()
    _sync(tr.device)
    warm, out = time.perf_counter() - t0, []
    if ready is not None:
        ready()
    for _ in range(windows):
        tokens0, t0 = tr.tokens, time.perf_counter()
        for _ in range(steps):
            tr.train_step()
        _sync(tr.device)
        seconds = time.perf_counter() - t0
        out.append(((tr.tokens - tokens0) / seconds, seconds, tr.tokens - tokens0))
    return warm, out


def measure(
    profile: str, corpus: str, steps: int, warmup: int, data_dir, overrides: dict, windows: int = 1, ready=None
) -> dict:
    """Train the base row at ``profile`` for warmup + windows x steps optimiser steps; the median window's rate."""
    import torch

    from transformer_core.run_config import make_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer

    from .estimate import KNOWN_DEVICES, match_device
    from .profiles import profile_values

    values = {**profile_values("base", profile), "corpus": corpus, **overrides, "steps": warmup + windows * steps}
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
        "fused_adam": config.train.fused_adam,
        "params": tr.params,
        "tokens_per_step": tokens / steps,
        "budget_per_step": config.train.tokens_per_batch * config.train.accumulate,
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
        "factor": together / alone["tokens_per_second"],
        "tokens_per_second": together,
        "per_trial": [round(r["tokens_per_second"], 1) for r in found],
        "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
        "peak_cuda_gb": max((r.get("peak_cuda_gb") or 0.0) for r in found) or None,
    }


def cmd_bench_device(args) -> int:
    from transformer_core.data import default_data_dir
    from transformer_core.errors import ConfigError

    from .cli_args import set_values
    from .estimate import store_measurement

    if args.steps < 1 or args.warmup < 0 or args.windows < 1:
        raise ConfigError(
            f"--steps {args.steps} --warmup {args.warmup} --windows {args.windows} is invalid: allowed steps >= 1, "
            "warmup >= 0, windows >= 1"
        )
    if not 1 <= args.share <= 8:
        raise ConfigError(f"--share {args.share} is invalid: allowed 1 to 8 trials sharing the device")
    data_dir = Path(args.data_dir or default_data_dir())
    overrides = set_values(args)
    what = dict(profile=args.profile, corpus=args.corpus, steps=args.steps, warmup=args.warmup,
                data_dir=args.data_dir, overrides=overrides, windows=args.windows)  # fmt: skip
    record = measure(**what)
    if args.share > 1:
        from .estimate import read_measurements

        earlier = read_measurements(data_dir).get(args.profile, {})
        same = earlier.get("device") == record["device"] and isinstance(earlier.get("sharing"), dict)
        shared = measure_sharing(args.share, what, record)
        record["sharing"] = {**(earlier["sharing"] if same else {}), str(args.share): shared}
    path = store_measurement(data_dir, args.profile, record)
    mfu = f", MFU {record['mfu']:.1%} of {record['peak_flops_per_second']:.3g}" if "mfu" in record else ""
    print(
        f"{record['device']} ({record['precision']}), base row at profile {args.profile!r}:"
        f" {record['params']:,} parameters, {record['seconds_per_step'] * 1000:.0f} ms per step of"
        f" {record['tokens_per_step']:,.0f} target tokens, {record['tokens_per_second']:,.0f} tokens/s"
    )
    compiled = f"; compile {record['compile_seconds']:.0f} s" if record["compile_seconds"] else ""
    print(
        f"windows of {record['steps']} steps: " + ", ".join(f"{w:,.0f}" for w in record["windows"])
        + f" tokens/s (the median is the result); warm-up {record['warmup_seconds']:.1f} s{compiled}"
    )  # fmt: skip
    adam = "fused" if record.get("fused_adam", True) else "loop"
    print(f"kernels: compile {record.get('compile', 'off')}, loss {record.get('loss_kernel', 'plain')}, {adam} Adam, "
          f"{record['precision']}")  # fmt: skip
    print(f"{record['flops_per_second']:.3g} FLOP/s (6 x params x tokens / s{mfu}); stored in {path}")
    if args.share > 1:
        shared = record["sharing"][str(args.share)]
        print(f"{args.share} trials sharing the device{' under MPS' if shared['mps'] else ''}: "
              f"{shared['tokens_per_second']:,.0f} tokens/s together (each: "
              + ", ".join(f"{x:,.0f}" for x in shared["per_trial"])
              + f"), {shared['factor']:.2f}x one trial alone; tsweep plan uses it for resources: "
              f"{{gpus: 1/{args.share}}}")  # fmt: skip
    return 0


def register(sub) -> None:
    from .cli_args import add_corpus_argument, add_data_dir_argument, add_profile_argument, add_set_argument

    p = sub.add_parser(
        "bench-device",
        help="measure this device's training FLOP/s on the base row (stored for tsweep plan)",
        description=__doc__,
    )
    add_profile_argument(p, "gpu", "the profile whose base row is measured", why="the device measured is a GPU")
    add_corpus_argument(p, "the corpus trained on (prepared first if it is not)", default="bible-en-de")
    p.add_argument("--steps", type=int, default=20, help="timed optimiser steps per window (default 20)")
    p.add_argument("--windows", type=int, default=3, help="timed windows; the median one's rate is stored (default 3)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    p.add_argument("--share", type=int, default=1, metavar="K",
                   help="also measure K trials training at once on the device (K >= 2); stored as the sharing "
                   "factor tsweep plan uses for resources: {gpus: 1/K} (default 1: one trial)")  # fmt: skip
    add_data_dir_argument(p)
    add_set_argument(p)
    p.set_defaults(func=cmd_bench_device)
