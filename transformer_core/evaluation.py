"""What a translation run is scored by: per-wordpiece perplexity, and sacrebleu BLEU and chrF on detokenised
beam-search output.

Reading an evaluation set from files or a recipe's split lives in ``data/eval_set.py``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .data.batching import collate, eval_batches
from .data.corpus import EncodedSplit
from .data.prepare import BOS, EOS, PAD
from .decoding import beam_search
from .device import autocast
from .loss import label_smoothed_nll


@torch.no_grad()
def perplexity(model, split: EncodedSplit, device, precision: str, budget: int = 4096) -> float:
    """exp(mean cross entropy per target wordpiece, EOS included); no label smoothing."""
    model.eval()
    total, count = 0.0, 0
    for index in eval_batches(split, budget):
        b = collate(split, index)
        limit = model.cfg.max_len
        with autocast(device, precision):
            logits = model(b.src[:, :limit].to(device), b.tgt_in[:, :limit].to(device))
        _, nll, n = label_smoothed_nll(logits, b.tgt_out[:, :limit].to(device), 0.0, PAD)
        total += float(nll)
        count += int(n)
    return math.exp(min(total / max(count, 1), 50.0))


@torch.no_grad()
def translate(
    model,
    split: EncodedSplit,
    processor,
    device,
    precision: str,
    beam: int = 4,
    alpha: float = 0.6,
    max_extra: int = 50,
    limit: int = 0,
    budget: int = 2048,
    stop: str = "exact",
) -> list[str]:
    """Detokenised beam-search translations of the first ``limit`` sources (all if 0), in order."""
    model.eval()
    n = len(split) if not limit else min(limit, len(split))
    indices = np.arange(n)
    hyps: list[str] = [""] * n
    for index in eval_batches(split, budget, indices):
        b = collate(split, index)
        with autocast(device, precision):
            results = beam_search(
                model,
                b.src[:, : model.cfg.max_len].to(device),
                BOS,
                EOS,
                beam=beam,
                alpha=alpha,
                max_extra=max_extra,
                stop=stop,
            )
        for i, (tokens, _) in zip(index, results):
            hyps[int(i)] = processor.decode(tokens)
    return hyps


def bleu(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """Corpus BLEU (sacrebleu defaults: 13a tokenisation, exp smoothing) and its signature."""
    from sacrebleu.metrics import BLEU

    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return float(score.score), str(metric.get_signature())


def chrf(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """Corpus chrF (sacrebleu defaults: character 6-grams, beta 2) and its signature."""
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    score = metric.corpus_score(hypotheses, [references])
    return float(score.score), str(metric.get_signature())
