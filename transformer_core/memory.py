"""What training one configuration must hold in memory, checked against the machine before anything is allocated.

The estimate is a lower bound from the knobs alone: 16 bytes per parameter (fp32 weights, their gradients and
Adam's two moments; bf16 autocast keeps fp32 weights too) and the sinusoidal position table (max_len x d_model,
built in float64).  Activations are left out: they depend on the batches the corpus gives, which a plan does not
know.  A configuration whose lower bound is above the machine's memory cannot train there; it is refused in one
line instead of dying in the allocator.

The limit is this machine's memory (physical memory, or the container's cgroup limit where that is smaller), or
``TSWEEP_MAX_TRIAL_MEMORY`` (bytes, or a number with K, M, G or T, e.g. 80G) to plan for a larger machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from .errors import ConfigError

BYTES_PER_PARAMETER = 16  # fp32 weights + gradients + Adam's first and second moments
MEMORY_ENV = "TSWEEP_MAX_TRIAL_MEMORY"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # not reached


def training_bytes(cfg) -> tuple[int, int]:
    """(lower bound of the bytes training ``cfg`` (a RunConfig) holds, its parameter count)."""
    from .params import closed_form_parameters_for

    m = cfg.model
    params = closed_form_parameters_for(m, cfg.data.vocab, cfg.data.task)
    table = 8 * m.max_len * m.d_model if m.positional == "sinusoidal" else 0
    return BYTES_PER_PARAMETER * params + table, params


def parse_size(text: str, what: str = MEMORY_ENV) -> int:
    """'80G', '512M', '1.5T' or a number of bytes -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"{what}={text!r} is invalid: allowed a size such as 80G, 512M or a number of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _cgroup_limit() -> Optional[int]:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # "max" or a huge number: no limit
            return int(text)
    return None


def machine_memory() -> Optional[int]:
    """This machine's memory in bytes (the cgroup limit where smaller); None where it cannot be read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    limit = _cgroup_limit()
    found = [x for x in (total, limit) if x]
    return min(found) if found else None


def memory_limit() -> tuple[Optional[int], str]:
    """(the bytes one trial may need, where that figure comes from)."""
    given = os.environ.get(MEMORY_ENV)
    if given:
        return parse_size(given), f"{MEMORY_ENV}={given}"
    total = machine_memory()
    return total, f"this machine's {human_bytes(total)} of memory" if total else "unknown"


def check_memory(cfg) -> None:
    """Refuse ``cfg`` in one line when training it needs more memory than the limit."""
    limit, source = memory_limit()
    need, params = training_bytes(cfg)
    if limit is None or need <= limit:
        return
    raise ConfigError(
        f"training needs at least {human_bytes(need)} ({params:,} parameters x {BYTES_PER_PARAMETER} bytes for "
        f"weights, gradients and Adam), more than {source}: make the model smaller (d_model, d_ff, N, h, vocab), "
        f"or set {MEMORY_ENV}=SIZE (e.g. 80G) when it will run on a machine with more"
    )
