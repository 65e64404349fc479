"""The native libraries' caches bounded, and a trial's peak memory measured per trial (transformer_core.native_memory).

The growth these guard against: with bf16 autocast on a CPU with native bf16, every new operand shape builds a
oneDNN primitive that oneDNN and ideep each cache (1,024 entries by default), about half a megabyte apiece."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from transformer_core import native_memory as nm

# Linear layers under bf16 autocast over 400 shapes (as length-bucketed batches give), forward and backward; the
# resident memory after the first 20 shapes and after all of them, in MB.
_SHAPES = """
import json, os, sys
import transformer_core  # sets the bounds, unless the environment already has them
import torch
torch.set_num_threads(1)
def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) / 1e3
w = torch.randn(512, 128, requires_grad=True)
out = []
for i, n in enumerate(range(8, 808, 2)):
    x = torch.randn(n, 128, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    y.float().sum().backward()
    if i == 19:
        out.append(rss())
out.append(rss())
print(json.dumps({"growth_mb": out[1] - out[0], "env": {k: os.environ.get(k) for k in %r}}))
""" % (nm.CACHE_VARIABLES,)


def _growth(env_extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in nm.CACHE_VARIABLES}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _SHAPES], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS (Linux)")
def test_bf16_shapes_do_not_grow_memory_with_the_bounds_transformer_core_sets():
    bounded = _growth({})
    assert bounded["env"] == {k: str(nm.CACHE_CAPACITY) for k in nm.CACHE_VARIABLES}
    assert bounded["growth_mb"] < 60, bounded  # 380 new shapes: a few dozen cached primitives at most
    unbounded = _growth({k: "1024" for k in nm.CACHE_VARIABLES})  # the libraries' defaults
    if unbounded["growth_mb"] < 100:
        pytest.skip(f"this CPU's bf16 path caches no primitives per shape ({unbounded['growth_mb']:.0f} MB)")
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
