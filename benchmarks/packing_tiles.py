"""How many of FlexAttention's key tiles each query tile visits, per packed layout, on a real corpus (CPU only).

FlexAttention's kernels work in tiles of 128 queries by 128 keys (``packed_attention=flex``; 64 by 64 with
``flex64``) and skip the tiles its block mask leaves out (transformer_core/segments.py builds it from the
segments).  For each layout of the gpu profile's batches (``on``: the padded stream's batches end to end;
``fill``: a seeded shuffle cut at the budget in real tokens, end to end; each of them in ``tiles``
(packed_layout=tiles: as many pairs in whole blocks as the buffer's room allows, the layout FlexAttention gets by
default); ``blocks``: a seeded shuffle placed first-fit into 128-token blocks, every pair in its block), over
``--batches`` batches of ``--tokens`` tokens: the buffer's capacity, real target tokens a step, the key tiles a
query tile visits in the encoder's self-attention, the decoder's (causal) and across, at each tile of
``--blocks``, with the keys a query computes against (tiles x tile), the host's milliseconds to lay a batch out,
and the seconds to plan an epoch.  The layouts place pairs in 128-token blocks whatever the tile, except the
``tiles of 64`` (``packed_attention=flex64``'s own), in 64-token ones.  Attention's
arithmetic and memory traffic grow with the keys computed against; what that is worth in a step's time is
measured on a GPU (benchmarks/gpu_candidates.py).

    python benchmarks/packing_tiles.py [--corpus bible-en-de] [--vocab 37000] [--tokens 25000] [--batches 20]
        [--blocks 128,64] [--data-dir D] [--out benchmarks/results/packing_tiles.txt]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_core.data import load_corpus  # noqa: E402
from transformer_core.data.packing import PackedStream  # noqa: E402
from transformer_core.segments import key_tiles  # noqa: E402

LAYOUTS = {"on": dict(), "on, tiles": dict(layout="tiles"), "on, tiles of 64": dict(layout="tiles", block=64),
           "fill": dict(fill=True), "fill, tiles": dict(fill=True, layout="tiles"),
           "fill, tiles of 64": dict(fill=True, layout="tiles", block=64), "blocks": dict(layout="blocks")}  # fmt: skip


def tiles(seg_q: torch.Tensor, seg_k: torch.Tensor, causal: bool, block: int) -> float:
    """Mean key tiles a query tile of ``block`` tokens visits (the block mask's runs, segments.key_tiles)."""
    return float(key_tiles(seg_q, seg_k, causal, block)[1].float().mean())


def measure(split, tokens: int, batches: int, seed: int, blocks: tuple[int, ...], **layout) -> dict:
    t0 = time.perf_counter()
    stream = PackedStream(split, tokens, seed=seed, max_len=256, **layout)
    plan_s = time.perf_counter() - t0
    rows, pack_s = [], 0.0
    for _ in range(min(batches, len(stream._plan))):
        t0 = time.perf_counter()
        pb = next(stream)
        pack_s += time.perf_counter() - t0
        rows.append([pb.tokens] + [t for b in blocks for t in (tiles(pb.seg_src, pb.seg_src, False, b),
                     tiles(pb.seg_tgt, pb.seg_tgt, True, b), tiles(pb.seg_tgt, pb.seg_src, False, b))])  # fmt: skip
    m = np.array(rows).mean(0)
    per_block = {b: dict(zip(("encoder", "decoder", "cross"), m[1 + 3 * i : 4 + 3 * i])) for i, b in enumerate(blocks)}
    return {"capacity": stream.shape.capacity, "tokens": m[0], "tiles": per_block,
            "pack_ms": 1000 * pack_s / len(rows), "plan_s": plan_s, "batches": len(rows)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--vocab", type=int, default=37000)
    ap.add_argument("--tokens", type=int, default=25000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--blocks", default="128,64", help="comma list of FlexAttention tiles (tokens)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from gpu_candidates import device_line  # the machine, torch, commit and date line every results table opens with
    from step_profile import cpu_flags

    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    mem = next((ln.split(":", 1)[1].strip() for ln in open("/proc/meminfo") if ln.startswith("MemTotal")), "?")

    blocks = tuple(int(b) for b in args.blocks.split(","))
    split = load_corpus(args.corpus, args.vocab, args.data_dir).split("train")
    lines = [device_line(True).replace("CPU dry run (smoke profile, fixture corpus)", f"CPU {model} ({cpu_flags()}; "
                                       f"memory {mem})"),
             "$ python benchmarks/packing_tiles.py " + " ".join(sys.argv[1:]),
             f"# {args.corpus} at vocab {args.vocab}, {len(split.src):,} training pairs; {args.tokens:,} tokens a "
             f"batch; the first {args.batches} batches of seed {args.seed}; tiles of {args.blocks} tokens"]  # fmt: skip
    for name, layout in LAYOUTS.items():
        r = measure(split, args.tokens, args.batches, args.seed, blocks, **layout)
        visits = "; ".join(
            f"{b}-token tiles: key tiles per query tile encoder {t['encoder']:.2f}, decoder {t['decoder']:.2f}, "
            f"cross {t['cross']:.2f} (keys a query meets {b * t['encoder']:.0f}, {b * t['decoder']:.0f}, "
            f"{b * t['cross']:.0f})"
            for b, t in r["tiles"].items()
        )
        lines.append(
            f"packing={name}: capacity {r['capacity']:,}, {r['tokens']:,.0f} real target tokens a step; {visits}; "
            f"laying a batch out {r['pack_ms']:.1f} ms, planning the epoch {r['plan_s']:.2f} s"
        )
        print(lines[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
