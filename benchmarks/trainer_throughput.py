"""Useful (non-padding) target tokens/s: our trainer vs a plain training loop, same model, same corpus.

The plain loop is what a user might write: fp32, batches of a fixed number of
sentences in corpus order shuffled, no length bucketing, logits for every
position (padding included).  Ours: token-budget batches bucketed by length,
logits only for real target positions, precision 'auto'.  Each runs for the
same wall time on bible-en-de; prints both rates and the ratio.

Then the step itself, before vs after (``--row-steps`` > 0): the base row of ``--profile`` (cpu: one thread per
trial) with each way of running a step (eager as before, fused Adam, fused Adam with the int32 dropout masks of
transformer_core/dropout.py, torch.compile, all; opt-in: the residual stream kept in bf16, eager and compiled, in
bf16 only), in each precision the machine has, alone and
two trials at once (two processes, one thread each), side by side in one run: target tokens/s, MFU against the
one-thread matmul peak measured in the same run (benchmarks/step_profile.py), the ratio to the first variant, and
the compile time (the first step, compiling included); ``--repeat`` runs the variants again, interleaved, and
prints each one's median. Last, one trial on two threads
against the two trials on one thread each (the sum of their rates): how a sweep should share two cores.

    python benchmarks/trainer_throughput.py [--seconds 90] [--corpus bible-en-de] [--vocab 8000]
        [--profile cpu] [--row-steps 100] [--variants before,fused_adam,int32_dropout,compile,after] [--repeat 1]
        [--skip-plain] [--no-two-threads]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import transformer_core as tc
from transformer_core.data import PAD, collate, load_corpus
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.trainer import Trainer

MODEL = dict(N=3, d_model=256, d_ff=1024, h=4, d_k=64, d_v=64)
VARIANTS = {  # explicit, so that a changed default does not move a variant
    "before": ["compile=off", "fused_adam=false", "fast_dropout=false"],
    "fused_adam": ["compile=off", "fused_adam=true", "fast_dropout=false"],
    "int32_dropout": ["compile=off", "fused_adam=true", "fast_dropout=true"],
    "compile": ["compile=on", "fused_adam=false", "fast_dropout=false"],
    "after": ["compile=on", "fused_adam=true", "fast_dropout=true"],
    # the residual stream kept in bf16 between sublayers (residual_dtype=bf16; bf16 precision only)
    "bf16_stream": ["compile=off", "fused_adam=true", "fast_dropout=false", "residual_dtype=bf16"],
    "compile_bf16_stream": ["compile=on", "fused_adam=true", "fast_dropout=false", "residual_dtype=bf16"],
}
DEFAULT_STEP = "fused_adam"


def plain_loop(corpus, seconds: float, sentences: int = 64) -> tuple[float, float]:
    torch.manual_seed(0)
    split = corpus.split("train")
    model = tc.build_model(tc.model_config("base", **MODEL), corpus.vocab_size, PAD).train()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-9)
    lossf = torch.nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    order = np.random.default_rng(0).permutation(len(split))
    useful = padded = 0
    t0 = time.perf_counter()
    i = 0
    while time.perf_counter() - t0 < seconds:
        idx = order[i : i + sentences]
        i = (i + sentences) % (len(order) - sentences)
        b = collate(split, idx)
        logits = model(b.src, b.tgt_in)
        loss = lossf(logits.reshape(-1, logits.shape[-1]), b.tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        useful += int((b.tgt_out != PAD).sum())
        padded += b.tgt_out.numel()
    return useful / (time.perf_counter() - t0), 1 - useful / padded


def our_trainer(corpus_name, vocab, data_dir, seconds: float) -> tuple[float, str]:
    cfg = make_run_config(
        {
            **MODEL,
            "corpus": corpus_name,
            "vocab": vocab,
            "data_dir": data_dir,
            "steps": 10**6,
            "tokens_per_batch": 4096,
            "warmup": 4000,
        }
    )
    with tempfile.TemporaryDirectory() as wd:
        tr = Trainer(cfg, __import__("pathlib").Path(wd), JsonTracker(f"{wd}/t.jsonl"), None)
        t0 = time.perf_counter()
        tokens = 0
        while time.perf_counter() - t0 < seconds:
            tokens += tr.train_step()[2]
        return tokens / (time.perf_counter() - t0), tr.precision


def row_steps(args) -> None:
    """The profile's base row, each variant, each precision, alone and two at once; one line each."""
    sys.path.insert(0, str(Path(__file__).parent))
    from step_profile import cpu_flags, machine_precisions, run_workers

    common = ["--profile", args.profile, "--corpus", args.corpus, "--steps", str(args.row_steps), "--no-profile"]
    common += ["--warmup", "10"] + (["--data-dir", args.data_dir] if args.data_dir else [])
    print(f"\nbase row of profile {args.profile}, one thread per trial, {args.row_steps} timed steps after 10; "
          f"CPU flags {cpu_flags()}, torch {torch.__version__}")  # fmt: skip
    for precision in machine_precisions():
        peak = run_workers([common + ["--worker", f"peak:{precision}"]])[0]["peak_gflops"]
        print(f"{precision}: one-thread matmul peak {peak:.0f} GFLOP/s")
        names = args.variants.split(",")
        for name in [n for n in names if precision != "bf16" and "residual_dtype=bf16" in VARIANTS[n]]:
            print(f"  {name:<13} not run: a bf16 residual stream needs precision bf16")
            names.remove(name)
        if not names:
            continue
        sums: dict = {}  # (variant, trials at once) -> the summed rate of each repeat
        for rep in range(args.repeat):  # repeats interleave the variants, so that drift in the machine's speed
            first = {}  # falls on all of them alike
            for name in names:
                sets = [x for kv in VARIANTS[name] for x in ("--set", kv)]
                for together in (1, 2):
                    runs = run_workers(
                        [common + sets + ["--worker", f"time:{precision}:{1 + i}"] for i in range(together)]
                    )
                    rates = [r["tokens_per_second"] for r in runs]
                    mfu = [6 * r["params"] * t / (peak * 1e9) for r, t in zip(runs, rates)]
                    first.setdefault(together, sum(rates))
                    sums.setdefault((name, together), []).append(sum(rates))
                    comp = [r["compile_seconds"] for r in runs if r["compile_seconds"] is not None]
                    print(f"  {name:<13} {'alone' if together == 1 else 'two at once':<11} "
                          + " + ".join(f"{t:6,.0f}" for t in rates) + " target tokens/s, MFU "
                          + " / ".join(f"{100 * m:.0f}%" for m in mfu)
                          + f", {sum(rates) / first[together]:.2f}x {names[0]} (compile {runs[0]['compile']}"
                          + (f", first step {max(comp):.0f} s" if comp else "") + ")"
                          + (f"  [repeat {rep + 1}]" if args.repeat > 1 else ""))  # fmt: skip
        if args.repeat > 1:
            print(f"  median of {args.repeat} repeats, summed target tokens/s and the ratio to {names[0]}:")
            for together in (1, 2):
                ref = float(np.median(sums[names[0], together]))
                print(f"    {'alone' if together == 1 else 'two at once':<11} " + ", ".join(
                    f"{n} {np.median(sums[n, together]):,.0f} ({np.median(sums[n, together]) / ref:.2f}x)"
                    for n in names))  # fmt: skip
        if args.two_threads:  # how two trials share two cores: one trial on both, against two on one each
            head = next((n for n in (DEFAULT_STEP, "fused_adam") if n in names), names[0])  # the default step
            sets = [x for kv in VARIANTS[head] for x in ("--set", kv)]
            one = run_workers([common + sets + ["--set", "threads=2", "--worker", f"time:{precision}:1"]])[0]
            rate = one["tokens_per_second"]
            print(f"  {head:<10} {'one trial, two threads':<11} {rate:6,.0f} target tokens/s, MFU "
                  f"{100 * 6 * one['params'] * rate / (2 * peak * 1e9):.0f}% of two threads' peak, "
                  f"{rate / float(np.median(sums[head, 2])):.2f}x the sum of {head}'s two trials above")  # fmt: skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--profile", default="cpu", help="the profile whose base row the step comparison trains")
    ap.add_argument("--row-steps", type=int, default=100, help="timed steps per step variant (0: skip that part)")
    ap.add_argument("--repeat", type=int, default=1, help="run the variants this many times, interleaved")
    ap.add_argument(
        "--variants", default="before,fused_adam,int32_dropout,compile,after", help=f"of {', '.join(VARIANTS)}"
    )
    ap.add_argument("--skip-plain", action="store_true", help="only the step comparison")
    ap.add_argument(
        "--no-two-threads",
        dest="two_threads",
        action="store_false",
        help="skip one trial on two threads (against two trials on one thread each)",
    )
    args = ap.parse_args()
    if not args.skip_plain:
        plain_vs_ours(args)
    if args.row_steps:
        row_steps(args)


def plain_vs_ours(args) -> None:
    corpus = load_corpus(args.corpus, args.vocab, args.data_dir)
    plain, waste = plain_loop(corpus, args.seconds)
    ours, precision = our_trainer(args.corpus, args.vocab, args.data_dir, args.seconds)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.corpus}, vocabulary {corpus.vocab_size}, "
        f"d_model 256, N 3, {args.seconds:.0f}s each"
    )
    print(
        f"plain loop (fp32, 64 sentences, {100 * waste:.0f}% of"
        f" target slots padding): {plain:7.0f} useful target tokens/s"
    )
    print(f"our trainer ({precision}, 4,096-token buckets, real positions only): {ours:7.0f} useful target tokens/s")
    print(f"ratio {ours / plain:.2f}x")


if __name__ == "__main__":
    main()
