"""The encoder-decoder Transformer (paper section 3) and its parameter count."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

import torch
from torch import nn

from .config import ModelConfig
from .dropout import Dropout
from .layers import DecoderLayer, EncoderLayer, make_norm
from .positional import make_positions
from .segments import Segments


@dataclass
class PackedSegments:
    """A packed buffer's three attention patterns: encoder self, decoder self (causal), decoder to encoder."""

    encoder: Segments
    decoder: Segments
    cross: Segments


@dataclass
class DecoderState:
    """What incremental decoding carries from one step to the next."""

    memory_kv: list  # per layer: (K, V) of the encoder output, (B, h, S, d)
    src_mask: torch.Tensor  # (B, 1, 1, S) bool
    caches: list = field(default_factory=list)  # per layer: {"k", "v"} of past target positions
    prefix: Optional[torch.Tensor] = None  # (B, t) tokens so far (used without cache)
    step: int = 0

    def select(self, index: torch.Tensor) -> "DecoderState":
        """Keep/reorder batch rows of every tensor (dropping finished sentences, expanding sources to beams)."""
        return replace(
            self.reorder(index),
            memory_kv=[(k.index_select(0, index), v.index_select(0, index)) for k, v in self.memory_kv],
            src_mask=self.src_mask.index_select(0, index),
        )

    def reorder(self, index: torch.Tensor) -> "DecoderState":
        """Reorder rows within each source's beam (beam search's step): every beam of a source holds the same
        encoder keys/values and source mask, so only the self-attention caches (and the prefix) move; the
        encoder's tensors, the largest part of the state, are not copied at every step."""
        return DecoderState(
            memory_kv=self.memory_kv,
            src_mask=self.src_mask,
            caches=[{n: t.index_select(0, index) for n, t in c.items()} for c in self.caches],
            prefix=None if self.prefix is None else self.prefix.index_select(0, index),
            step=self.step,
        )


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int = 0):
        super().__init__()
        self.cfg, self.vocab_size, self.pad_id = cfg, vocab_size, pad_id
        d = cfg.d_model
        self.tgt_embed = nn.Embedding(vocab_size, d, padding_idx=pad_id)
        self.src_embed = self.tgt_embed if cfg.tie == "all" else nn.Embedding(vocab_size, d, padding_idx=pad_id)
        self.generator = nn.Linear(d, vocab_size, bias=False)
        if cfg.tie in ("all", "decoder"):
            self.generator.weight = self.tgt_embed.weight
        self.positions = make_positions(cfg.positional, cfg.max_len, d)  # adds 0 with rope, alibi (in attention), none
        self.embed_dropout = Dropout(cfg.P_drop)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        pre = cfg.norm == "pre"
        self.encoder_norm = make_norm(cfg.norm_type, d) if pre else nn.Identity()
        self.decoder_norm = make_norm(cfg.norm_type, d) if pre else nn.Identity()
        self.embed_scale = math.sqrt(d)
        self._init_weights()

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name and "positions" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
        for emb in {id(self.tgt_embed): self.tgt_embed, id(self.src_embed): self.src_embed}.values():
            nn.init.normal_(emb.weight, std=self.cfg.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.pad_id].zero_()

    def _embed(self, table: nn.Embedding, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = table(tokens) * self.embed_scale + self.positions(tokens.shape[1], offset)
        return self.embed_dropout(x)  # (B, T, d_model)

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        return (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, S)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> memory (B, S, d_model), src_mask (B, 1, 1, S)."""
        mask = self.source_mask(src)
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.encoder_norm(x), mask

    def memory_kv(self, memory: torch.Tensor) -> list:
        return [layer.cross_attn.project_kv(memory) for layer in self.decoder]

    def decode_hidden(
        self,
        tgt_in: torch.Tensor,
        memory_kv: list,
        src_mask: torch.Tensor,
        caches: Optional[list] = None,
        offset: int = 0,
    ) -> torch.Tensor:
        """Decoder output before the pre-softmax projection: (B, T, d_model)."""
        x = self._embed(self.tgt_embed, tgt_in, offset)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory_kv[i], src_mask, None if caches is None else caches[i])
        return self.decoder_norm(x)

    def features(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, mask = self.encode(src)
        return self.decode_hidden(tgt_in, self.memory_kv(memory), mask)

    def packed_features(
        self,
        src: torch.Tensor,
        src_pos: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_pos: torch.Tensor,
        segments: "PackedSegments",
    ) -> torch.Tensor:
        """``features`` of a packed buffer (data/packing.py): src, tgt_in and their per-token positions (1, C);
        every sentence attends within its own segment.  (1, C, d_model)."""
        x = self.embed_dropout(self.src_embed(src) * self.embed_scale + self.positions.at(src_pos))
        for layer in self.encoder:
            x = layer(x, segments.encoder, src_pos)
        memory_kv = self.memory_kv(self.encoder_norm(x))
        y = self.embed_dropout(self.tgt_embed(tgt_in) * self.embed_scale + self.positions.at(tgt_pos))
        for i, layer in enumerate(self.decoder):
            y = layer(y, memory_kv[i], segments.cross, None, segments.decoder, tgt_pos)
        return self.decoder_norm(y)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) for teacher-forced target input."""
        return self.generator(self.features(src, tgt_in))

    # incremental inference ---------------------------------------------------
    def start_state(self, src: torch.Tensor, use_cache: bool = True) -> DecoderState:
        memory, mask = self.encode(src)
        caches = [{} for _ in self.decoder] if use_cache else []
        prefix = None if use_cache else src.new_zeros(src.shape[0], 0)
        return DecoderState(self.memory_kv(memory), mask, caches, prefix)

    def decode_step(self, tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Feed one token per row (B,), return log-probabilities (B, vocab) for the next one."""
        if state.prefix is None:
            h = self.decode_hidden(tokens[:, None], state.memory_kv, state.src_mask, state.caches, state.step)
        else:  # recompute the whole prefix (reference path, used to test the cache)
            state.prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)
            h = self.decode_hidden(state.prefix, state.memory_kv, state.src_mask)
        state.step += 1
        return torch.log_softmax(self.generator(h[:, -1]).float(), dim=-1)


def build_model(config: ModelConfig, vocab_size: int, pad_id: int = 0) -> Transformer:
    if vocab_size < 2 or not (0 <= pad_id < vocab_size):
        raise ValueError(f"vocab_size={vocab_size}, pad_id={pad_id}: need vocab_size >= 2 and 0 <= pad_id < vocab_size")
    return Transformer(config, vocab_size, pad_id)


def count_parameters(model: nn.Module) -> int:
    """Unique parameters: a tied matrix counts once."""
    return sum(p.numel() for p in model.parameters())  # parameters() already de-duplicates shared tensors
