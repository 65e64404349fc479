"""Greedy and batched beam search (paper section 6.1: beam 4, length penalty 0.6).

Both decode incrementally: encoder keys/values for cross-attention are
projected once per source, self-attention keys/values are cached per step,
and sentences that are finished leave the batch.  ``use_cache=False`` runs the
same search by recomputing the whole prefix each step (the reference path).

Positions agree between the two paths for every ``positional`` kind: additive ones are read at
``DecoderState.step``; in self-attention a new token's absolute position is its cache's length, so rope
caches keys rotated at the position they were computed at and alibi's bias row is that of the new position.
"""

from __future__ import annotations

import torch

from .model import Transformer


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def _max_lengths(model: Transformer, src: torch.Tensor, max_extra: int) -> list[int]:
    src_len = (src != model.pad_id).sum(dim=1)
    return [min(int(n) + max_extra, model.cfg.max_len) for n in src_len]


@torch.no_grad()
def greedy_decode(
    model: Transformer, src: torch.Tensor, bos: int, eos: int, max_extra: int = 50, use_cache: bool = True
) -> list[list[int]]:
    """Most likely next token at each step; returns token ids without BOS/EOS."""
    B = src.shape[0]
    max_len = _max_lengths(model, src, max_extra)
    state = model.start_state(src, use_cache)
    alive = list(range(B))
    out: list[list[int]] = [[] for _ in range(B)]
    last = torch.full((B,), bos, dtype=torch.long, device=src.device)
    while alive:
        nxt = model.decode_step(last, state).argmax(dim=-1)
        keep = []
        for r, sid in enumerate(alive):
            tok = int(nxt[r])
            if tok == eos:
                continue
            out[sid].append(tok)
            if len(out[sid]) < max_len[sid]:
                keep.append(r)
        if len(keep) < len(alive):
            index = torch.tensor(keep, dtype=torch.long, device=src.device)
            state, nxt = state.select(index), nxt.index_select(0, index)
            alive = [alive[r] for r in keep]
        last = nxt
    return out


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    bos: int,
    eos: int,
    beam: int = 4,
    alpha: float = 0.6,
    max_extra: int = 50,
    use_cache: bool = True,
    stop: str = "exact",
) -> list[tuple[list[int], float]]:
    """Batched beam search; returns (tokens without BOS/EOS, length-normalised log-probability) per source.

    ``stop``: when a source's search ends before its length limit.  ``exact`` (tensor2tensor's rule, the
    paper's): once no live hypothesis could beat the best finished one even at the longest length (scores
    only fall, the length penalty only grows): the result is that of searching to the limit.  ``length``:
    once none beats it at the current length (no further growth of the penalty assumed; a live hypothesis
    can end at the next step at the earliest, under a slightly larger penalty), which ends searches sooner
    and can miss a longer hypothesis that a larger penalty would have ranked first.  Every hypothesis it
    finishes, exact finishes too, so its result never scores above exact's (up to floating-point differences
    that a batch of another size can bring)."""
    if stop not in ("exact", "length"):
        raise ValueError(f"stop={stop!r}: allowed exact or length")
    exact = stop == "exact"
    B, K, device = src.shape[0], beam, src.device
    max_len = _max_lengths(model, src, max_extra)
    state = model.start_state(src, use_cache).select(torch.arange(B, device=device).repeat_interleave(K))
    alive = list(range(B))
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0
    seqs = torch.empty(B * K, 0, dtype=torch.long, device=device)
    last = torch.full((B * K,), bos, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    best_fin = [float("-inf")] * B  # best finished score per source
    final_lp = [length_penalty(m, alpha) for m in max_len]
    t = 0
    while alive:
        n = len(alive)
        logp = model.decode_step(last, state)  # (n*K, V)
        V = logp.shape[-1]
        cand = (scores.unsqueeze(2) + logp.view(n, K, V)).view(n, K * V)
        top_s, top_i = cand.topk(2 * K, dim=1)  # (n, 2K)
        from_beam, tok = top_i // V, top_i % V
        t += 1
        is_eos = tok == eos
        lp = length_penalty(t, alpha)
        ended = is_eos[:, :K].nonzero().tolist()  # an EOS ranked among the top K ends a hypothesis
        if ended:
            top_list, beam_list = top_s.tolist(), from_beam.tolist()
            for r, c in ended:
                if top_list[r][c] > float("-inf"):
                    score = top_list[r][c] / lp
                    finished[alive[r]].append((score, seqs[r * K + beam_list[r][c]].tolist()))
                    best_fin[alive[r]] = max(best_fin[alive[r]], score)
        sel_s, sel_j = top_s.masked_fill(is_eos, float("-inf")).topk(K, dim=1)
        rows = (torch.arange(n, device=device).unsqueeze(1) * K + from_beam.gather(1, sel_j)).view(-1)
        seqs = torch.cat([seqs.index_select(0, rows), tok.gather(1, sel_j).view(-1, 1)], dim=1)
        scores, last = sel_s, tok.gather(1, sel_j).view(-1)
        state = state.reorder(rows)  # rows stay within their source's beam (from_beam < K)
        keep = []
        row_best = scores.max(dim=1).values.tolist()  # one read per step, not one per sentence
        for r, sid in enumerate(alive):
            # an active hypothesis can at best keep its score (log-probabilities only fall) and, under exact,
            # reach the longest length (the penalty only grows); length assumes the current one: stop when no
            # active one can win
            if finished[sid] and best_fin[sid] >= row_best[r] / (final_lp[sid] if exact else lp):
                continue
            if t >= max_len[sid]:
                finished[sid].extend((v / lp, seqs[r * K + k].tolist()) for k, v in enumerate(scores[r].tolist()))
                continue
            keep.append(r)
        if len(keep) < n:
            index = torch.tensor([r * K + k for r in keep for k in range(K)], dtype=torch.long, device=device)
            state, seqs, last = state.select(index), seqs.index_select(0, index), last.index_select(0, index)
            scores = scores[torch.tensor(keep, dtype=torch.long, device=device)]
            alive = [alive[r] for r in keep]
    results = []
    for fin in finished:
        score, tokens = max(fin, key=lambda f: f[0])
        results.append((tokens, score))
    return results
