"""Beam search with the key/value cache vs recomputing the prefix, same model and sources.

Beam 4, batch 32, about 40 output tokens per sentence (an untrained model runs
to the length limit: source length 20 + 20).  Prints seconds and the ratio.

    python benchmarks/beam_cache.py
"""

from __future__ import annotations

import time

import torch

import transformer_core as tc


def main():
    torch.manual_seed(0)
    cfg = tc.model_config("base", N=3, d_model=256, d_ff=1024, h=4, d_k=64, d_v=64, P_drop=0.0)
    model = tc.build_model(cfg, 8000).eval()
    src = torch.randint(3, 8000, (32, 20))
    times = {}
    for use_cache in (True, False, True, False):
        t0 = time.perf_counter()
        out = tc.beam_search(model, src, bos=1, eos=2, beam=4, alpha=0.6, max_extra=20, use_cache=use_cache)
        times.setdefault(use_cache, []).append(time.perf_counter() - t0)
    length = sum(len(t) for t, _ in out) / len(out)
    cached, plain = min(times[True]), min(times[False])
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads;"
        f" beam 4, batch 32, {length:.0f} output tokens per sentence"
    )
    print(f"cached {cached:.2f}s   uncached {plain:.2f}s   speed-up {plain / cached:.1f}x")


if __name__ == "__main__":
    main()
