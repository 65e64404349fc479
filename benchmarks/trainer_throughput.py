"""Useful (non-padding) target tokens/s: our trainer vs a plain training loop, same model, same corpus.

The plain loop is what a user might write: fp32, batches of a fixed number of
sentences in corpus order shuffled, no length bucketing, logits for every
position (padding included).  Ours: token-budget batches bucketed by length,
logits only for real target positions, precision 'auto'.  Each runs for the
same wall time on bible-en-de; prints both rates and the ratio.

    python benchmarks/trainer_throughput.py [--seconds 90] [--corpus bible-en-de] [--vocab 8000]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch

import transformer_core as tc
from transformer_core.data import PAD, collate, load_corpus
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.train import Trainer

MODEL = dict(N=3, d_model=256, d_ff=1024, h=4, d_k=64, d_v=64)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--corpus", default="bible-en-de")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
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
