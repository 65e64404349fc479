"""Device and precision choice: measured, not assumed."""

from __future__ import annotations

import functools
import logging
import platform
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import torch

from .errors import ConfigError

log = logging.getLogger(__name__)
DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "fp32", "bf16")
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # x86 instructions that compute in bf16 (Linux's names)


def resolve_device(name: str) -> torch.device:
    if name not in DEVICES and not name.startswith("cuda:"):
        raise ConfigError(f"device={name!r} is invalid: allowed {', '.join(DEVICES)} or cuda:N")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={name!r} but no CUDA device is visible: use device=auto or cpu")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError("device='mps' but Apple MPS is not available: use device=auto or cpu")
    return torch.device(name)


@functools.lru_cache(maxsize=None)
def cpu_bf16_speedup(size: int = 512, rounds: int = 7) -> float:
    """fp32 time / bf16 time of a matrix product on this CPU (> 1 means bf16 is faster).

    Without native bf16 instructions (AVX512-BF16, AMX) bf16 matmuls on CPU can be two orders of magnitude
    slower than fp32, so this is measured: the fastest of ``rounds`` timings of each, interleaved, so that a
    moment of contention (another trial starting beside this one) slows single timings, not the fastest.  One
    timing of each after a warm-up flipped precision=auto to fp32 on an AVX512-BF16 machine for one trial of a
    side-by-side pair (its ratio is about 2 there, and that timing put it below 1.1).
    """
    a, b = torch.randn(size, size), torch.randn(size, size)
    a16, b16 = a.bfloat16(), b.bfloat16()
    a @ b, a16 @ b16  # warm-up: oneDNN builds its bf16 kernel at the first call
    best = {torch.float32: float("inf"), torch.bfloat16: float("inf")}
    for _ in range(rounds):
        for x, y in ((a, b), (a16, b16)):
            t = time.perf_counter()
            x @ y
            best[x.dtype] = min(best[x.dtype], time.perf_counter() - t)
    return best[torch.float32] / max(best[torch.bfloat16], 1e-9)


@functools.lru_cache(maxsize=None)
def cpu_flags() -> Optional[frozenset[str]]:
    """This x86 CPU's feature flags as Linux lists them (/proc/cpuinfo), or None where there is no such list (other
    systems, other architectures).  Linux names avx512_bf16 from 5.2 on: an older kernel on such a CPU gets fp32
    from precision=auto without the probe (bf16 stays a knob away)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    line = next((x for x in text.splitlines() if x.startswith("flags")), None)
    return frozenset(line.split(":", 1)[1].split()) if line else None


def resolve_precision(name: str, device: torch.device) -> str:
    if name not in PRECISIONS:
        raise ConfigError(f"precision={name!r} is invalid: allowed {', '.join(PRECISIONS)}")
    if name != "auto":
        return name
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if device.type == "cpu":
        flags = cpu_flags()
        if flags is not None and not flags & BF16_FLAGS:  # bf16 emulated in fp32 instructions: slower, not measured
            log.debug("no bf16 instructions on this CPU (%s): fp32", ", ".join(sorted(BF16_FLAGS)))
            return "fp32"
        speedup = cpu_bf16_speedup()
        log.debug("bf16/fp32 matmul speed on this CPU: %.2fx", speedup)
        return "bf16" if speedup > 1.1 else "fp32"
    return "fp32"


def autocast(device: torch.device, precision: str):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()
