"""The native libraries' caches bounded, and a trial's peak memory measured per trial (transformer_core.native_memory).

The growth these guard against: with bf16 autocast on a CPU with native bf16, every new operand shape builds a
oneDNN primitive that oneDNN and ideep each cache (1,024 entries by default), about half a megabyte apiece."""

import os
import sys

import pytest

from tests.helpers import ROOT
from transformer_core import native_memory as nm

sys.path.insert(0, str(ROOT / "benchmarks"))
from worker_memory import shape_growth  # noqa: E402  (linear layers under bf16 over 380 new shapes, fresh process)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS (Linux)")
def test_bf16_shapes_do_not_grow_memory_with_the_bounds_transformer_core_sets():
    # the libraries' defaults first: where they grow nothing (no per-shape primitives on this CPU's bf16 path, as
    # on AVX2-only machines), the bounded run has nothing to show and is not paid for (about 20 s on 2 cores)
    unbounded = shape_growth("bf16", {k: "1024" for k in nm.CACHE_VARIABLES})
    if unbounded["growth_mb"] < 100:
        pytest.skip(f"this CPU's bf16 path caches no primitives per shape ({unbounded['growth_mb']:.0f} MB)")
    bounded = shape_growth("bf16")
    assert bounded["env"] == {k: str(nm.CACHE_CAPACITY) for k in nm.CACHE_VARIABLES}
    # 380 new shapes: the capped caches hold a few dozen primitives; what else the process allocates over the loop
    # varies by machine, so the bound leaves room for it and still fails where either cache is left unbounded
    # (hundreds of MB: benchmarks/results/worker_memory.txt)
    assert bounded["growth_mb"] < 120, bounded
    assert unbounded["growth_mb"] > 2 * bounded["growth_mb"] + 50, (unbounded, bounded)


def test_a_users_own_cache_setting_is_kept(monkeypatch):
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "7")
    monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)
    assert nm.bound_caches() == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "7", "LRU_CACHE_CAPACITY": str(nm.CACHE_CAPACITY)}


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="resets VmHWM (Linux)")
def test_peak_memory_is_counted_from_the_last_reset():
    import numpy as np

    nm.reset_peak()
    base = nm.peak_bytes()
    block = np.ones(200_000_000 // 8)  # 200 MB touched
    high = nm.peak_bytes()
    del block
    nm.release_free_memory()
    assert high - base > 150e6
    assert nm.reset_peak() and nm.peak_bytes() < high - 150e6  # a reused worker's next trial starts afresh
    assert nm.gb(1_234_567_890) == 1.235 and nm.gb(None) is None
