"""A GPT-style decoder-only language model (task=lm): its stack, its scores, greedy samples.

The stack is the encoder-decoder's own parts: token embedding x sqrt(d_model) plus the additive
positions (sinusoidal, learned; nothing for rope, alibi and none, which act in self-attention), then ``N``
layers (``N_dec`` when given) that are the encoder's layer class run under a causal mask (self-attention
and feed-forward, no cross-attention: exactly a GPT block), a final norm (``norm_type``) with pre-norm,
and the pre-softmax projection tied to the input embedding (``tie=none`` unties them).  Every architecture
knob of ModelConfig (d_k, d_v, h, norm, norm_type, activation, positional, dropouts) reaches it through
those classes.  A line is read as BOS + pieces and
predicts pieces + EOS; lines are independent (no context across lines).

Scores (``score``), over a split of lines, each line's pieces and EOS predicted from what precedes it:

* NLL: the summed negative log-likelihood in nats of every predicted piece, EOS included;
* tokens: the number of predicted pieces (EOS included); per-token perplexity = exp(NLL / tokens), the
  translation task's definition;
* bytes: the UTF-8 bytes of the lines as prepared (normalised, one line each), plus one byte per line for
  the newline that EOS stands for: the size of the split's text file;
* bits per byte: NLL / (ln 2 x bytes).  It does not depend on the tokenizer: the LM's BPE uses identity
  normalisation, so the pieces of a line spell exactly its bytes, and the model's probability of the pieces
  is a probability of the text.  Exact where no piece is <unk> (a character never seen in training; every
  training character is in the vocabulary); ``unk`` counts them.

A line longer than the model's max_len is scored in consecutive windows of max_len predictions, each
without context from the window before (every piece is predicted exactly once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .config import ModelConfig, check_lm_config
from .data.corpus import EncodedSplit
from .data.prepare import BOS, EOS, PAD, UNK
from .device import autocast
from .dropout import Dropout
from .layers import EncoderLayer, make_norm
from .positional import make_positions


class DecoderOnlyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int = PAD):
        super().__init__()
        check_lm_config(cfg)
        self.cfg, self.vocab_size, self.pad_id = cfg, vocab_size, pad_id
        d = cfg.d_model
        self.embed = nn.Embedding(vocab_size, d, padding_idx=pad_id)
        self.generator = nn.Linear(d, vocab_size, bias=False)
        if cfg.tie != "none":  # "decoder" and "all" both tie the one embedding to the softmax
            self.generator.weight = self.embed.weight
        self.positions = make_positions(cfg.positional, cfg.max_len, d)
        self.embed_dropout = Dropout(cfg.P_drop)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.final_norm = make_norm(cfg.norm_type, d) if cfg.norm == "pre" else nn.Identity()
        self.embed_scale = math.sqrt(d)
        self._init_weights()

    def _init_weights(self) -> None:  # as the encoder-decoder's (model.Transformer._init_weights)
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name and "positions" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
        nn.init.normal_(self.embed.weight, std=self.cfg.d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[self.pad_id].zero_()

    def features(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T), right-padded -> hidden states (B, T, d_model) before the softmax projection."""
        T = tokens.shape[1]
        x = self.embed_dropout(self.embed(tokens) * self.embed_scale + self.positions(T, 0))
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()[None, None]  # (1, 1, T, T)
        for layer in self.layers:
            x = layer(x, causal)  # right padding: a real position never sees a padded one
        return self.final_norm(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) of the next piece at every position."""
        return self.generator(self.features(tokens))


def build_lm(cfg: ModelConfig, vocab_size: int, pad_id: int = PAD) -> DecoderOnlyLM:
    if vocab_size < 2 or not (0 <= pad_id < vocab_size):
        raise ValueError(f"vocab_size={vocab_size}, pad_id={pad_id}: need vocab_size >= 2 and 0 <= pad_id < vocab_size")
    return DecoderOnlyLM(cfg, vocab_size, pad_id)


# ---------------------------------------------------------------------------------------------- scores
@dataclass(frozen=True)
class Score:
    nll: float  # nats, summed over every predicted piece (EOS included)
    tokens: int  # predicted pieces, EOS included
    bytes: int  # UTF-8 bytes of the lines + one per line (the newline EOS stands for)
    unk: int = 0  # <unk> pieces among the predicted ones

    @property
    def ce(self) -> float:
        return self.nll / max(self.tokens, 1)

    @property
    def ppl(self) -> float:
        return math.exp(min(self.ce, 50.0))

    @property
    def bpb(self) -> float:
        return self.nll / (math.log(2) * max(self.bytes, 1))


def text_bytes(lines: list[str]) -> int:
    """UTF-8 bytes of the lines as a text file: each line and its newline."""
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _windows(split: EncodedSplit, window: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(inputs, targets) per line: BOS + pieces -> pieces + EOS, cut into windows of at most ``window``."""
    out = []
    for pieces in split.tgt:
        inp = np.concatenate([[BOS], pieces]).astype(np.int64)
        tgt = np.concatenate([pieces, [EOS]]).astype(np.int64)
        out += [(inp[i : i + window], tgt[i : i + window]) for i in range(0, len(tgt), window)]
    return out


@torch.no_grad()
def score(model: DecoderOnlyLM, split: EncodedSplit, device, precision: str, budget: int = 4096) -> Score:
    """NLL, tokens, bytes and <unk> count of a split (see the module doc), batched by length under
    ``budget`` padded tokens; no label smoothing, no dropout."""
    model.eval()
    rows = sorted(_windows(split, model.cfg.max_len), key=lambda r: len(r[0]))
    batches, current = [], []
    for row in rows:  # ascending lengths: a batch's last row is its longest
        if current and (len(current) + 1) * len(row[0]) > budget:
            batches.append(current)
            current = []
        current.append(row)
    batches += [current] if current else []
    nll, tokens = 0.0, 0
    for batch in batches:
        inp = torch.full((len(batch), len(batch[-1][0])), PAD, dtype=torch.long)
        tgt = torch.full_like(inp, PAD)
        for k, (a, b) in enumerate(batch):
            inp[k, : len(a)], tgt[k, : len(b)] = torch.from_numpy(a), torch.from_numpy(b)
        inp, tgt = inp.to(device), tgt.to(device)
        with autocast(device, precision):
            logits = model(inp)
        logp = torch.log_softmax(logits.float(), dim=-1)
        mask = tgt != PAD
        nll -= float(logp.gather(-1, tgt[..., None]).squeeze(-1)[mask].sum())
        tokens += int(mask.sum())
    unk = sum(int((t == UNK).sum()) for t in split.tgt)
    return Score(nll, tokens, text_bytes(split.tgt_text), unk)


@torch.no_grad()
def greedy(model: DecoderOnlyLM, prompt: list[int], device, max_new: int = 48) -> list[int]:
    """The most likely continuation of BOS + ``prompt``, piece by piece, until EOS or ``max_new`` pieces."""
    model.eval()
    tokens = torch.tensor([[BOS, *prompt]], dtype=torch.long, device=device)
    out: list[int] = []
    for _ in range(max_new):
        window = tokens[:, -model.cfg.max_len :]
        nxt = int(model(window)[0, -1].argmax())
        if nxt == EOS:
            break
        out.append(nxt)
        tokens = torch.cat([tokens, tokens.new_tensor([[nxt]])], dim=1)
    return out


def samples(
    model: DecoderOnlyLM, processor, lines: list[str], device, n: int = 4, words: int = 4, max_new: int = 48
) -> list[str]:
    """Greedy continuations of the first ``words`` words of the first ``n`` lines: '[prompt] continuation'."""
    out: list[str] = []
    for line in lines[:n]:
        prompt = " ".join(line.split()[:words])
        ids = processor.encode(prompt)
        full = processor.decode(ids + greedy(model, ids, device, max_new))
        out.append(f"[{prompt}]{full[len(prompt) :] if full.startswith(prompt) else ' ' + full}")
    return out
