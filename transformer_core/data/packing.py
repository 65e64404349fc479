"""Packed batches: a micro-batch's sentences laid end to end in buffers of one fixed shape.

A padded batch (``batching.collate``) is (B, S) and (B, T), and B, S and T change from batch to batch: every new
shape is a new graph for a compiler and a new capture for a CUDA graph.  A packed batch holds the same sentences
in one row of ``capacity`` tokens per side, whatever they are:

    src     [s0 s0 s0 EOS | s1 s1 EOS | ... | PAD PAD]      (1, capacity)
    tgt_in  [BOS t0 t0    | BOS t1    | ... | PAD PAD]      (1, capacity)
    tgt_out [t0 t0 EOS    | t1 EOS    | ... | PAD PAD]      (1, capacity)

Sentence i's source and target are segment i on each side; the unused tail of each buffer is cut into as many
more segments on both sides (each at least one token, so that its queries always have keys of their own, and at
most the longest sentence, so that no segment is longer than what varlen attention is told), and
``cu_src``/``cu_tgt`` (the cumulative segment boundaries, varlen attention's ``cu_seqlens``) are padded to
``segments + 1`` entries with empty segments at the end, so that their shape is fixed too.
``src_pos``/``tgt_pos`` are each token's position within its sentence (0 in the tail); ``weight`` is 1 at a
real target position and 0 in the tail, and ``tokens`` (the real target tokens) is a host number: the step never
asks the device how many there are.

Which sentences a batch holds: by default the padded stream's own plan (``plan_batches``, the same seed), so a
packed trial trains on the very batches a padded one does and only its dropout masks differ.  With ``fill``,
``plan_packed`` plans the epoch instead: the sentences in a seeded random order, cut greedily where the next pair
would take either side past the token budget counted in real tokens (the paper's batches held "about 25,000
source and 25,000 target tokens"), so a batch is a random sample of the corpus rather than a length bucket and
holds more real tokens than a padded batch of the same budget: another batch composition, which the trial
records.

With ``blocks`` the buffers are laid out for FlexAttention's block-sparse kernels, whose tiles are BLOCK (128)
tokens on each side: end to end, short sentences straddle tile boundaries, and a query tile visits two or three
key tiles (measured on bible-en-de at 25,000 tokens: 2.9 in the encoder, 2.0 in the decoder, 2.3 across).
``plan_blocks`` places the pairs of a seeded shuffle first-fit into the buffer's BLOCK-token blocks, a pair's
source and target in the block of the same number on the two sides, each block keeping a token of each side for
a gap segment; the batch ends at the first pair that fits no block.  ``pack_blocks`` lays each block out as its
sentences and the gap, so every sentence lies within one block (a pair longer than a block takes whole blocks
of its own) and each query tile attends to the one key tile of its own number, causally in the decoder.  The
same sentences end to end would hold the same real tokens: the blocks cost what their gaps hold (about 4% of a
buffer there) and save most of the attention's tiles.

The padded stream's batches (and ``fill``'s) can be laid out in tiles too, as far as their buffer's room allows
(``pack_tiles``, the knob packed_layout, ``tiles`` by default under FlexAttention): first fit decreasing into
blocks, the blocks that waste least on their gaps kept whole while the room lasts, the other pairs end to end
after them.  The same sentences a step; fewer key tiles (benchmarks/results/packing_tiles.txt).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .batching import Batch, BatchStream
from .corpus import EncodedSplit
from .prepare import BOS, EOS, PAD

ALIGN = 8  # capacity is a multiple of this (tensor-core friendly row counts)
BLOCK = 128  # the blocks layout's block: FlexAttention's tile (segments.FLEX_BLOCK)


@dataclass
class PackedBatch:
    src: torch.Tensor  # (1, capacity) source ids + EOS per segment, PAD in the tail
    src_pos: torch.Tensor  # (1, capacity) position within its sentence, 0 in the tail
    tgt_in: torch.Tensor  # (1, capacity) BOS + target ids per segment
    tgt_out: torch.Tensor  # (1, capacity) target ids + EOS per segment
    tgt_pos: torch.Tensor  # (1, capacity)
    weight: torch.Tensor  # (capacity,) float: 1 at real target positions, 0 in the tail
    cu_src: torch.Tensor  # (segments + 1,) int32 segment boundaries on the source side
    cu_tgt: torch.Tensor  # (segments + 1,) int32 on the target side
    seg_src: torch.Tensor  # (capacity,) int64 segment of each source token (the tail: its own segment)
    seg_tgt: torch.Tensor  # (capacity,) int64
    tokens: int  # real target tokens (host number)
    index: np.ndarray  # sentence indices in the split

    @property
    def target_tokens(self) -> int:
        return self.tokens

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The tensors a packed step reads, in the order ``ForwardLoss.prepare_packed`` moves them."""
        return (self.src, self.src_pos, self.tgt_in, self.tgt_pos, self.tgt_out, self.weight, self.cu_src,
                self.cu_tgt, self.seg_src, self.seg_tgt)  # fmt: skip


@dataclass(frozen=True)
class PackedShape:
    """The one shape of every packed batch of a trial.

    capacity: tokens per side; span: the longest segment (the longest pair's side, and each piece of the tail is
    cut to at most this); tails: the most pieces a tail is cut into (as many tokens are always left over for it);
    segments: segment slots, the pairs the shortest sentences could fill the budget with plus ``tails``.
    """

    capacity: int
    segments: int
    span: int
    tails: int


def packed_shape(budget: int, src_len: np.ndarray, tgt_len: np.ndarray) -> PackedShape:
    """The buffer that holds any batch ``plan_packed`` cuts from pairs of these lengths (EOS/BOS counted): the
    budget or the longest single pair (a pair longer than the budget is a batch of its own), plus room for the
    tail, rounded up to ALIGN."""
    # at least ALIGN: a tail is cut into pieces of at most span tokens (of one token each, a corpus of empty
    # sentences would need as many pieces as tokens, and the search below would not end)
    span = max(int(max(src_len.max(), tgt_len.max())), ALIGN)
    base = max(budget, span)
    tails = 1
    while True:  # the tail is at least `tails` tokens, and no tail of capacity tokens needs more pieces than that
        capacity = -(-(base + tails) // ALIGN) * ALIGN
        need = -(-capacity // span)
        if need <= tails:
            break
        tails = need
    fits = [int(np.searchsorted(np.cumsum(np.sort(n)), base, side="right")) for n in (src_len, tgt_len)]
    return PackedShape(capacity, max(1, min(fits)) + tails, span, tails)


def plan_packed(
    src_len: np.ndarray, tgt_len: np.ndarray, budget: int, seed: int, indices: np.ndarray | None = None
) -> list[np.ndarray]:
    """Sentence indices in a seeded random order, cut into batches of at most ``budget`` real tokens per side
    (a single pair longer than that is a batch of its own)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(len(src_len)) if indices is None else np.asarray(indices)
    idx = idx[rng.permutation(len(idx))]
    s_cum, t_cum = np.cumsum(src_len[idx]), np.cumsum(tgt_len[idx])
    batches, start = [], 0
    while start < len(idx):
        s0 = s_cum[start - 1] if start else 0
        t0 = t_cum[start - 1] if start else 0
        # the first position past the budget on either side ends the batch (at least one pair per batch)
        end = min(np.searchsorted(s_cum, s0 + budget, side="right"), np.searchsorted(t_cum, t0 + budget, side="right"))
        end = max(end, start + 1)
        batches.append(idx[start:end])
        start = end
    return batches


def _tails(used: tuple[int, int], shape: PackedShape, pairs: int) -> tuple[list[int], list[int]]:
    """The two tails cut into the same number of pieces, each at most ``span`` and at least one token long (the
    i-th target piece attends to the i-th source piece in cross-attention)."""
    cut = _cut_tails(used, shape, pairs)
    if cut is None:
        raise ValueError(
            f"{pairs} sentences of {used[0]} and {used[1]} tokens do not fit a packed buffer of {shape.capacity} "
            f"tokens and {shape.segments} segments"
        )
    return cut


def _cut_tails(used: tuple[int, int], shape: PackedShape, segments: int) -> tuple[list[int], list[int]] | None:
    """``_tails``'s pieces after ``segments`` segments holding ``used`` tokens on each side, or None where they do
    not fit the buffer (more pieces than its tails or its segment slots allow, or a side with fewer tokens left than
    pieces)."""
    left = [shape.capacity - u for u in used]
    pieces = -(-max(left) // shape.span)
    if pieces > shape.tails or min(left) < pieces or segments + pieces > shape.segments:
        return None
    return tuple(np.diff(np.linspace(0, n, pieces + 1).round().astype(np.int64)).tolist() for n in left)  # type: ignore[return-value]


def pack(split: EncodedSplit, index: np.ndarray, shape: PackedShape) -> PackedBatch:
    """The pairs ``index`` of ``split`` packed into buffers of ``shape``: the same tokens ``collate`` puts in a
    padded batch, end to end."""
    parts = _parts(split, index)
    lens = ([len(s) for s in parts[0]], [len(t) for t in parts[2]])
    tail = _tails((sum(lens[0]), sum(lens[1])), shape, len(index))
    real = [*range(len(index)), *[-1] * len(tail[0])]
    return _batch(parts, (lens[0] + tail[0], lens[1] + tail[1]), real, shape, index)


def pack_batch(split: EncodedSplit, batch: Batch, shape: PackedShape) -> PackedBatch:
    """A padded batch's sentences, packed (for comparing the two layouts on the same pairs)."""
    return pack(split, batch.index, shape)


def blocks_shape(budget: int, src_len: np.ndarray, tgt_len: np.ndarray, block: int = BLOCK) -> PackedShape:
    """The buffer of the blocks layout: whole ``block``-token blocks holding at least the budget and the longest
    pair (with its gap); a segment (a pair's side, a gap, a piece of the tail) is at most ``span`` = the longest
    pair's blocks."""
    longest = int(max(src_len.max(), tgt_len.max()))
    k_max = -(-(longest + 1) // block)
    blocks = max(-(-budget // block), k_max)
    capacity, span = blocks * block, k_max * block
    # the most pairs a block holds (each side keeps a token for the gap), the gaps, and a tail of whole blocks
    per_block = min((block - 1) // max(1, int(lengths.min())) for lengths in (src_len, tgt_len))
    return PackedShape(capacity, blocks * per_block + 2 * blocks, span, blocks)


def first_fit(
    src_len: np.ndarray, tgt_len: np.ndarray, blocks: int, block: int = BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """Place pairs in order into ``blocks`` blocks of ``block`` tokens: (each pair's first block, -1 from the first
    pair that fits none; each opened block's count of blocks in its group: 1, k for a pair of k blocks, 0 for the
    blocks after its first).  A pair whose longer side fits a block (with a token left for the gap) goes to the
    first block with room on both sides; a longer one takes fresh blocks of its own."""
    s_used, t_used = np.zeros(blocks, dtype=np.int64), np.zeros(blocks, dtype=np.int64)
    size = np.zeros(blocks, dtype=np.int64)
    where = np.full(len(src_len), -1, dtype=np.int64)
    opened = 0
    for i, (s, t) in enumerate(zip(src_len.tolist(), tgt_len.tolist())):
        if max(s, t) < block:
            room = np.flatnonzero((s_used[:opened] + s < block) & (t_used[:opened] + t < block))
            if room.size:
                b = int(room[0])
            elif opened < blocks:
                b, opened = opened, opened + 1
                size[b] = 1
            else:
                break
            s_used[b] += s
            t_used[b] += t
        else:
            k = -(-(max(s, t) + 1) // block)
            if opened + k > blocks:
                break
            b, opened = opened, opened + k
            size[b] = k
            s_used[b : b + k] = t_used[b : b + k] = block  # closed: nothing else goes there
        where[i] = b
    return where, size[:opened]


def plan_blocks(
    src_len: np.ndarray, tgt_len: np.ndarray, budget: int, seed: int, indices: np.ndarray | None = None
) -> list[np.ndarray]:
    """Sentence indices in a seeded random order (plan_packed's), cut where the next pair fits none of the
    blocks layout's blocks (``blocks_shape``): each batch is what ``pack_blocks`` lays out."""
    rng = np.random.default_rng(seed)
    idx = np.arange(len(src_len)) if indices is None else np.asarray(indices)
    idx = idx[rng.permutation(len(idx))]
    shape = blocks_shape(budget, src_len[idx], tgt_len[idx])
    blocks, most = shape.capacity // BLOCK, shape.segments  # no batch holds more pairs than segments
    batches, start = [], 0
    while start < len(idx):
        ahead = idx[start : start + most + 1]
        where, _ = first_fit(src_len[ahead], tgt_len[ahead], blocks)
        end = start + max(1, int(np.argmin(where >= 0)) if (where < 0).any() else len(where))
        batches.append(idx[start:end])
        start = end
    return batches


def pack_blocks(split: EncodedSplit, index: np.ndarray, shape: PackedShape) -> PackedBatch:
    """The pairs ``index`` of ``split`` in the blocks layout of ``shape`` (``blocks_shape``): block by block, the
    sentences first_fit placed there, then the block's gap (its own segment on both sides, weighted 0); after the
    last block the tail, a segment per block."""
    parts = _parts(split, index)
    s_len, t_len = (np.array([len(x) for x in parts[i]], dtype=np.int64) for i in (0, 2))
    where, size = first_fit(s_len, t_len, shape.capacity // BLOCK)
    if (where < 0).any():
        raise ValueError(f"{len(index)} sentences do not fit the {shape.capacity // BLOCK} blocks of a packed buffer")
    members, gaps = _groups(where, size, s_len, t_len)
    sizes, real = _in_blocks(members, gaps, s_len, t_len)
    # the tail: whole blocks, each a segment of its own on both sides, so that its tiles visit one key tile too
    tail = [BLOCK] * (shape.capacity // BLOCK - len(size))
    for side in sizes:
        side += tail
    real += [-1] * len(tail)
    return _batch(parts, sizes, real, shape, index)


def pack_tiles(split: EncodedSplit, index: np.ndarray, shape: PackedShape, block: int = BLOCK) -> PackedBatch:
    """The pairs ``index`` in a buffer of ``shape`` (``packed_shape``'s: the batch's own tokens and little room
    besides), as many as that room allows in whole ``block``-token blocks: first_fit's groups, the most tightly
    filled first, each closed by its gap as in pack_blocks; after them the other pairs end to end, then the tail as
    ``pack`` cuts it.  The same sentences and tokens as ``pack``; where the room holds no block's gap, ``pack``'s
    layout."""
    parts = _parts(split, index)
    s_len, t_len = (np.array([len(x) for x in parts[i]], dtype=np.int64) for i in (0, 2))
    k_each = -(-(np.maximum(s_len, t_len) + 1) // block)
    order = np.argsort(-np.maximum(s_len, t_len), kind="stable")  # first fit decreasing: fuller blocks
    # room for every pair: each placed
    placed, size = first_fit(s_len[order], t_len[order], int(k_each.sum()), block)
    where = np.empty_like(placed)
    where[order] = placed
    members, gaps = _groups(where, size, s_len, t_len, block)
    blocks = size[np.flatnonzero(size)]  # each group's blocks
    # the room beside the pairs' tokens: what is left after the kept blocks' gaps must still cut into a tail of
    # as many pieces on both sides (each at least a token, at most span)
    left = np.array([shape.capacity - int(s_len.sum()), shape.capacity - int(t_len.sum())])
    kept = np.zeros(len(members), dtype=bool)
    for g in np.argsort(gaps.max(1) / blocks, kind="stable"):  # the least gap per block first
        after = left - gaps[g]
        pieces = -(-after.max() // shape.span)
        # the segments: every pair, a gap per kept block and this one, the tail's pieces
        if after.min() >= pieces and len(index) + int(kept.sum()) + 1 + pieces <= shape.segments:
            kept[g], left = True, after
    sizes, real = _in_blocks([members[g] for g in np.flatnonzero(kept)], gaps[kept], s_len, t_len)
    rest = np.sort(np.concatenate([members[g] for g in np.flatnonzero(~kept)] or [np.zeros(0, dtype=np.int64)]))
    for side, lens in zip(sizes, (s_len, t_len)):
        side += lens[rest].tolist()
    real += rest.tolist()
    tail = _cut_tails((sum(sizes[0]), sum(sizes[1])), shape, len(real)) if kept.any() else None
    if tail is None:
        return pack(split, index, shape)
    for side, cut in zip(sizes, tail):
        side += cut
    real += [-1] * len(tail[0])
    return _batch(parts, sizes, real, shape, index)


def _parts(split: EncodedSplit, index: np.ndarray) -> tuple[list, list, list]:
    """Each pair's source (+ EOS), target input (BOS +) and target output (+ EOS) ids."""
    srcs = [np.append(np.asarray(split.src[i], dtype=np.int64), EOS) for i in index]
    tgts = [np.asarray(split.tgt[i], dtype=np.int64) for i in index]
    return srcs, [np.concatenate([[BOS], t]) for t in tgts], [np.append(t, EOS) for t in tgts]


def _groups(
    where: np.ndarray, size: np.ndarray, s_len: np.ndarray, t_len: np.ndarray, block: int = BLOCK
) -> tuple[list, np.ndarray]:
    """first_fit's groups in block order: each one's pairs, and its gap on each side (groups, 2): the group's
    blocks less its tokens."""
    starts = np.flatnonzero(size)
    members = [np.flatnonzero(where == b) for b in starts]
    gaps = [[int(size[b]) * block - int(lens[m].sum()) for lens in (s_len, t_len)] for b, m in zip(starts, members)]
    return members, np.array(gaps, dtype=np.int64).reshape(-1, 2)


def _in_blocks(members: list, gaps: np.ndarray, s_len: np.ndarray, t_len: np.ndarray) -> tuple:
    """(sizes of each side's segments, each segment's pair or -1) of these groups laid out block after block:
    a group's pairs, then its gap."""
    sizes: tuple[list[int], list[int]] = ([], [])
    real: list[int] = []  # each segment's pair (its position in the batch's index), -1 for a gap or the tail
    for m, gap in zip(members, gaps):
        for side, lens, g in zip(sizes, (s_len, t_len), gap):
            side += [*lens[m].tolist(), int(g)]
        real += [*m.tolist(), -1]
    return sizes, real


def _batch(parts: tuple, sizes: tuple, real: list[int], shape: PackedShape, index: np.ndarray) -> PackedBatch:
    """The PackedBatch of pairs ``parts`` (``_parts``) in segments ``sizes`` (source, target) that tile the buffer,
    segment i holding pair ``real[i]`` on every buffer (-1: a gap or a piece of the tail, PAD and weighted 0)."""
    srcs, tgt_in_parts, tgt_out_parts = parts
    src, cu_src, seg_src, pos_src = _laid_out(srcs, sizes[0], real, shape)
    tgt_in, cu_tgt, seg_tgt, pos_tgt = _laid_out(tgt_in_parts, sizes[1], real, shape)
    tgt_out = _laid_out(tgt_out_parts, sizes[1], real, shape)[0]
    weight = (np.array(real) >= 0)[seg_tgt]  # the segments tile the buffer: 1 at a pair's target tokens
    return PackedBatch(
        src=src, src_pos=torch.from_numpy(pos_src)[None], tgt_in=tgt_in, tgt_out=tgt_out,
        tgt_pos=torch.from_numpy(pos_tgt)[None], weight=torch.from_numpy(weight.astype(np.float32)),
        cu_src=torch.from_numpy(cu_src), cu_tgt=torch.from_numpy(cu_tgt), seg_src=torch.from_numpy(seg_src),
        seg_tgt=torch.from_numpy(seg_tgt), tokens=int(sum(len(t) for t in tgt_out_parts)), index=np.asarray(index),
    )  # fmt: skip


def _laid_out(parts: list, sizes: list[int], real: list[int], shape: PackedShape) -> tuple:
    """One side's buffer (1, capacity), boundaries, segment ids and positions: segment i of ``sizes`` holds pair
    ``real[i]``'s ids (PAD and position 0 where it is a gap or the tail)."""
    cu = np.full(shape.segments + 1, shape.capacity, dtype=np.int32)
    cu[0] = 0
    cu[1 : len(sizes) + 1] = np.cumsum(sizes)
    seg = np.repeat(np.arange(len(sizes)), sizes)
    out, pos = np.full(shape.capacity, PAD, dtype=np.int64), np.zeros(shape.capacity, dtype=np.int64)
    which = np.asarray(real)
    kept = np.flatnonzero(which >= 0)
    if kept.size:
        lens = np.asarray(sizes, dtype=np.int64)[kept]
        within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)  # offset in its sentence
        at = np.repeat(cu[kept].astype(np.int64), lens) + within
        out[at] = np.concatenate([parts[r] for r in which[kept]])
        pos[at] = within
    return torch.from_numpy(out)[None], cu, seg, pos


class PackedStream(BatchStream):
    """Endless stream of packed training batches of one shape: per epoch, the batches BatchStream plans for the
    same seed (``plan_batches``), or with ``fill`` a fresh seeded ``plan_packed``.  Its state is BatchStream's
    (epoch, position), so that checkpoints of either kind have the same keys."""

    def __init__(
        self,
        split: EncodedSplit,
        budget: int,
        seed: int,
        max_len: int = 256,
        rank: int = 0,
        world_size: int = 1,
        fill: bool = False,
        layout: str = "end",
        block: int = BLOCK,
    ):
        """``fill``: plan_packed's batches, else the padded stream's; laid out end to end (``layout="end"``,
        ``pack``) or as many as the buffer's room allows in ``block``-token blocks (``"tiles"``, ``pack_tiles``:
        FlexAttention's tile); ``"blocks"``: plan_blocks's batches, every pair in its 128-token block
        (``pack_blocks``)."""
        if layout not in ("end", "tiles", "blocks"):
            raise ValueError(f"layout={layout!r} is invalid: allowed 'end', 'tiles' or 'blocks'")
        self.fill, self.layout, self.block = fill, layout, block
        if fill:
            self.planner = plan_packed
        if layout == "blocks":
            self.planner = plan_blocks
        super().__init__(split, budget, seed, max_len, rank, world_size)
        shaped = blocks_shape if layout == "blocks" else packed_shape
        self.shape = shaped(budget, self.src_len[self.indices], self.tgt_len[self.indices])

    def make_batch(self, index: np.ndarray) -> PackedBatch:  # type: ignore[override]
        if self.layout == "blocks":
            return pack_blocks(self.split, index, self.shape)
        if self.layout == "tiles":
            return pack_tiles(self.split, index, self.shape, self.block)
        return pack(self.split, index, self.shape)
