"""Packed batches (data/packing.py, segments.py, packed_step.py): the same loss and gradients as padded batches of
the same sentences, one shape across an epoch, no host read inside the step, and the rows packing cannot serve
routed to the padded step."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from transformer_core.compiling import ForwardLoss
from transformer_core.config import ModelConfig
from transformer_core.data.batching import collate, plan_batches
from transformer_core.data.packing import PackedStream, pack, packed_shape, plan_packed
from transformer_core.data.prepare import PAD
from transformer_core.model import build_model
from transformer_core.packed_step import PackedForwardLoss, packed_loss, resolve_packing
from transformer_core.segments import flash_head_size, flex_available, packed_support

# Table 3's base and the rows the issue names, at a small width (fp32, dropout off: the two layouts' sums differ
# only by the order of float additions)
SMALL = dict(N=2, d_model=32, d_ff=64, h=4, d_k=8, d_v=8, P_drop=0.0, max_len=256)
ROWS = {
    "base": {},
    "B1": dict(d_k=2),  # a smaller key size than d_v: d_k != d_v
    "C4": dict(d_model=16, d_k=4, d_v=4),
    "wide-keys": dict(d_k=12, d_v=4),  # d_k > d_v, neither a multiple of 8: q, k and v padded to 16
    "E1": dict(positional="learned"),
    "rope": dict(positional="rope", norm="pre", activation="gelu"),
}


def _lengths(split):
    return np.array([len(x) + 1 for x in split.src]), np.array([len(x) + 1 for x in split.tgt])


def _batch(split, n=9, seed=0):
    src_len, tgt_len = _lengths(split)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(len(src_len), size=n, replace=False))


def _loss_and_grads(model, fn):
    model.zero_grad(set_to_none=True)
    loss, nll = fn()
    loss.backward()
    return loss.detach(), nll, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _padded_and_packed(row: str, corpus, backend: str, seed: int = 0):
    """Loss and gradients of one batch of the row's fp32 model, padded and packed (``backend``): (padded, packed,
    the padded batch, the packed one, the target positions the padded step selected)."""
    split = corpus.split("train")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**SMALL, **ROWS[row]}), corpus.vocab_size).train()
    index = _batch(split, seed=seed)
    padded = ForwardLoss(model, 0.1, torch.device("cpu"), "fp32")
    batch = collate(split, index)
    inputs, idx, target = padded.prepare((batch.src, batch.tgt_in), batch.tgt_out)
    ref = _loss_and_grads(model, lambda: padded(inputs, idx, target))
    shape = packed_shape(1200, *_lengths(split))
    packed = PackedForwardLoss(model, 0.1, torch.device("cpu"), "fp32", "off", backend, shape)
    pb = pack(split, index, shape)
    return ref, _loss_and_grads(model, lambda: packed(packed.prepare(pb))), batch, pb, idx.numel()


@pytest.mark.parametrize("row", sorted(ROWS))
def test_packed_loss_and_gradients_equal_the_padded_step_in_fp32(row, fixture_corpus):
    ref, got, batch, pb, selected = _padded_and_packed(row, fixture_corpus, "mask")
    assert pb.tokens == batch.target_tokens == selected
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(got[1], ref[1], rtol=1e-5, atol=1e-4)
    assert got[2].keys() == ref[2].keys()
    for name in ref[2]:
        torch.testing.assert_close(got[2][name], ref[2][name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("row", ["base", "B1", "E1"])
def test_flex_attention_gives_the_padded_step_loss_in_fp32(row, fixture_corpus):
    """FlexAttention with the block mask built from segment ids gives the padded step's loss (forward only: torch
    has no FlexAttention backward on a CPU; the gpu test below holds its gradients to the padded step's)."""
    split = fixture_corpus.split("train")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**SMALL, **ROWS[row]}), fixture_corpus.vocab_size).eval()
    index = _batch(split, seed=1)
    padded = ForwardLoss(model, 0.1, torch.device("cpu"), "fp32")
    batch = collate(split, index)
    with torch.no_grad():
        ref = padded(*padded.prepare((batch.src, batch.tgt_in), batch.tgt_out))[0]
        shape = packed_shape(1200, *_lengths(split))
        pb = pack(split, index, shape)
        for backend in ("flex", "flex64", "mask"):
            packed = PackedForwardLoss(model, 0.1, torch.device("cpu"), "fp32", "off", backend, shape)
            torch.testing.assert_close(packed(packed.prepare(pb))[0], ref, rtol=1e-5, atol=1e-4, msg=backend)


@pytest.mark.parametrize("flex", ["flex", "flex64"])
@pytest.mark.parametrize("backend", ["eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_the_flex_step_compiles_whole(backend, flex, fixture_corpus):
    """The flex step, block mask included, traces as one graph (fullgraph: no break, no host read); inductor's
    CPU kernels give the eager loss (forward: a CPU has no FlexAttention backward)."""
    import torch._dynamo as dynamo

    split = fixture_corpus.split("train")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**SMALL), fixture_corpus.vocab_size).eval()
    shape = packed_shape(1200, *_lengths(split))
    tensors = pack(split, _batch(split), shape).tensors()
    dynamo.reset()
    compiled = torch.compile(packed_loss, dynamic=False, backend=backend, fullgraph=True)
    with torch.no_grad():
        want = packed_loss(model, tensors, shape.span, "mask", 0.1, "cpu", "fp32")[0]
        got = compiled(model, tensors, shape.span, flex, 0.1, "cpu", "fp32")[0]
    dynamo.reset()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("block", [128, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_the_flex_block_mask_visits_every_key_block_a_query_block_needs_and_no_later_one(causal, block):
    """Segments of 1 to 300 tokens over a buffer of odd length: the blocks the mask visits are exactly those
    holding a (query, key) pair of one segment (and, causal, no key after the query), at either tile."""
    from transformer_core.segments import flex_block_mask

    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 300, size=40)
    seg = torch.from_numpy(np.repeat(np.arange(40), lengths))
    bm = flex_block_mask(seg, seg, causal, block)
    assert bm.BLOCK_SIZE == (block, block)
    dense = seg[:, None] == seg[None, :]
    if causal:
        dense &= torch.ones_like(dense).tril().bool()
    n = -(-len(seg) // block)
    pad = n * block - len(seg)
    blocks = F.pad(dense, (0, pad, 0, pad)).view(n, block, n, block).any(3).any(1)
    counts, indices = bm.kv_num_blocks[0, 0], bm.kv_indices[0, 0]
    visited = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        visited[i, indices[i, : counts[i]].long()] = True
    assert torch.equal(visited, blocks)


def test_a_sentence_that_sees_another_changes_the_loss(fixture_corpus):
    """The equivalence above could not fail if segments leaked into each other unnoticed: a mask that lets
    every token see every other token of the buffer gives another loss."""
    split = fixture_corpus.split("train")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**SMALL), fixture_corpus.vocab_size).train()
    src_len, tgt_len = _lengths(split)
    shape = packed_shape(1200, src_len, tgt_len)
    pb = pack(split, _batch(split), shape)
    packed = PackedForwardLoss(model, 0.1, torch.device("cpu"), "fp32", "off", "mask", shape)
    tensors = packed.prepare(pb)
    right = packed(tensors)[0].detach()
    leaky = list(tensors)
    leaky[8] = torch.zeros_like(tensors[8])  # every source token in segment 0
    leaky[9] = torch.zeros_like(tensors[9])
    assert abs(float(packed(tuple(leaky))[0].detach() - right)) > 1e-3


@pytest.mark.parametrize("fill", [False, True])
def test_packing_keeps_every_sentence_and_the_budget_and_one_shape_across_an_epoch(fill, fixture_corpus):
    split = fixture_corpus.split("train")
    budget = 300
    stream = PackedStream(split, budget, seed=3, max_len=64, fill=fill)
    seen, shapes = [], set()
    for _ in range(len(stream._plan)):
        pb = next(stream)
        assert stream.epoch == 0
        seen += pb.index.tolist()
        shapes.add(tuple(tuple(t.shape) for t in pb.tensors()))
        src_real = int((pb.src != PAD).sum())
        assert pb.tokens <= budget or len(pb.index) == 1
        assert src_real <= budget or len(pb.index) == 1
        assert int(pb.weight.sum()) == pb.tokens == int((pb.tgt_out != PAD).sum())
        cu = pb.cu_src.numpy()
        assert cu[0] == 0 and cu[-1] == stream.shape.capacity and (np.diff(cu) >= 0).all()
        assert np.diff(cu).max() <= stream.shape.span and np.diff(pb.cu_tgt.numpy()).max() <= stream.shape.span
    assert sorted(seen) == sorted(stream.indices.tolist())  # every pair once per epoch
    assert len(shapes) == 1
    if fill:  # full buffers: the budget in real tokens is what a step holds
        side = [max(sum(len(split.src[i]) + 1 for i in b), sum(len(split.tgt[i]) + 1 for i in b)) for b in stream._plan]
        assert np.mean(side) > 0.9 * budget


def test_packing_on_trains_the_padded_streams_very_batches(fixture_corpus):
    """packing=on changes the layout, not the data: the same sentences a step as BatchStream, in the same order."""
    from transformer_core.data.batching import BatchStream

    split = fixture_corpus.split("train")
    padded, packed = BatchStream(split, 300, seed=5, max_len=64), PackedStream(split, 300, seed=5, max_len=64)
    for _ in range(len(padded._plan) + 3):  # into the second epoch
        assert next(padded).index.tolist() == next(packed).index.tolist()
    filled = PackedStream(split, 300, seed=5, max_len=64, fill=True)
    assert next(filled).index.tolist() != next(BatchStream(split, 300, seed=5, max_len=64)).index.tolist()


def test_a_planned_batch_never_passes_the_budget_counted_in_real_tokens():
    rng = np.random.default_rng(0)
    src_len, tgt_len = rng.integers(2, 60, 5000), rng.integers(2, 60, 5000)
    plan = plan_packed(src_len, tgt_len, 500, seed=1)
    assert sorted(np.concatenate(plan).tolist()) == list(range(5000))
    for b in plan:
        assert src_len[b].sum() <= 500 and tgt_len[b].sum() <= 500
    assert np.mean([max(src_len[b].sum(), tgt_len[b].sum()) for b in plan]) > 470  # one side nearly full
    shape = packed_shape(500, src_len, tgt_len)
    assert max(len(b) for b in plan) + shape.tails <= shape.segments
    assert plan != plan_batches(src_len, tgt_len, 500, seed=1)  # another composition than the padded plan's


class _NoHostRead(TorchDispatchMode):
    """Fails on an operator that makes the host wait for a device number or shapes a tensor by its data."""

    FORBIDDEN = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "item")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__
        if any(name.startswith(f) for f in self.FORBIDDEN):
            raise AssertionError(f"host read in the packed step: {name}")
        return func(*args, **(kwargs or {}))


def test_the_packed_step_reads_nothing_back_from_the_device(fixture_corpus):
    split = fixture_corpus.split("train")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**SMALL, "P_drop": 0.1}), fixture_corpus.vocab_size).train()
    src_len, tgt_len = _lengths(split)
    shape = packed_shape(1200, src_len, tgt_len)
    packed = PackedForwardLoss(model, 0.1, torch.device("cpu"), "fp32", "off", "mask", shape)
    tensors = packed.prepare(pack(split, _batch(split), shape))
    with _NoHostRead():
        loss, _ = packed(tensors)
        loss.backward()
    padded = ForwardLoss(model, 0.1, torch.device("cpu"), "fp32")
    batch = collate(split, _batch(split))
    with pytest.raises(AssertionError, match="host read"), _NoHostRead():  # the guard sees the padded step's
        padded.prepare((batch.src, batch.tgt_in), batch.tgt_out)


def test_rows_packing_cannot_serve_are_routed_to_the_padded_step():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    base = ModelConfig(**SMALL)
    assert packed_support(ModelConfig(**{**SMALL, "positional": "alibi"}), cpu)[0] is None
    assert packed_support(base, cpu, task="lm")[0] is None
    assert packed_support(base, cpu)[0] == "mask"
    big_head = ModelConfig(**{**SMALL, "h": 1, "d_k": 512, "d_v": 512})  # A1's head at the paper's width
    backend, why = packed_support(big_head, cuda)
    if backend is None:  # a torch without varlen names that first
        assert "256" in why or "varlen" in why
    assert packed_support(ModelConfig(**{**SMALL, "attention_dropout": 0.1}), cuda)[0] is None
    assert packed_support(base, cuda, precision="fp32")[0] is None  # FlashAttention: half precision only
    assert packed_support(base, cpu, precision="fp32")[0] == "mask"
    flex = {"attention": "flex", "compile_mode": "graphs"}
    if flex_available():  # the model's own limits, after what this torch offers
        assert packed_support(big_head, cuda, **flex) == (None, "head size 512 is above FlexAttention's 256 here")
        assert packed_support(base, cuda, **flex) == (None, "head size 8 is below FlexAttention's 16")
        sixteen = ModelConfig(**{**SMALL, "d_k": 16, "d_v": 16})
        assert packed_support(sixteen, cuda, precision="fp32", **flex)[0] == "flex"  # flex: any precision
        assert packed_support(sixteen, cuda, attention="flex64", compile_mode="graphs") == (
            "flex64",
            "FlexAttention with a block mask of 64-token blocks",
        )
        assert packed_support(big_head, cuda, attention="flex64", compile_mode="on")[1].startswith("head size 512")
    assert packed_support(base, cuda, attention="flex")[1].startswith("FlexAttention runs compiled") or not (
        flex_available()
    )
    assert flash_head_size(16, 64) == 64 and flash_head_size(12, 12) == 16
    assert resolve_packing("off", base, cpu, "translation")[0] is None
    assert resolve_packing("auto", base, cpu, "translation")[0] is None
    assert resolve_packing("on", base, cpu, "translation")[0] == "mask"


def test_the_packed_step_compiles_once_across_an_epoch(fixture_corpus):
    """Dynamo with guards at static shapes (its eager backend: the guards, not inductor's kernels, are what a
    recompile would come from): no batch of an epoch recompiles it."""
    import torch._dynamo as dynamo

    from transformer_core.packed_step import packed_loss

    split = fixture_corpus.split("train")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**SMALL, "P_drop": 0.1}), fixture_corpus.vocab_size).train()
    stream = PackedStream(split, 400, seed=1, max_len=64)
    dynamo.reset()
    compiled = torch.compile(packed_loss, dynamic=False, backend="eager", fullgraph=True)  # no graph break either
    with dynamo.config.patch(error_on_recompile=True):
        for _ in range(min(12, len(stream._plan))):
            pb = next(stream)
            loss, _ = compiled(model, pb.tensors(), stream.shape.span, "mask", 0.1, "cpu", "fp32")
            loss.backward()
    dynamo.reset()


def test_a_packed_trial_trains_and_records_its_layout(fixture_corpus, fixture_data_dir, tmp_path):
    from tests.helpers import tiny_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer, packing_keys

    seen = {}
    for packing in ("on", "off"):
        config = tiny_run_config(fixture_data_dir, packing=packing, steps=20, P_drop=0.1)
        tr = Trainer(config, tmp_path / packing, JsonTracker(tmp_path / f"{packing}.jsonl"), None)
        losses = [tr.advance()[0] for _ in range(20)]
        seen[packing] = (losses, packing_keys(tr))
    on, off = seen["on"][1], seen["off"][1]
    assert on["packing"] == "mask" and on["batch_stream"].startswith("packed: the padded stream's batches")
    assert off["packing"] == "off" and off["batch_stream"].startswith("padded")
    for losses, _ in seen.values():  # both learn: the last steps' loss well under the first's
        assert np.mean(losses[-5:]) < np.mean(losses[:3]) - 0.3


def test_drawing_the_next_packed_batch_ahead_changes_no_step_and_no_checkpoint(fixture_data_dir, tmp_path):
    """The lookahead a packed CUDA trial uses (forced on here, on a CPU): the same losses step for step, and a
    checkpoint taken with a batch drawn ahead resumes into the same steps as the run that went on."""
    from tests.helpers import tiny_run_config
    from transformer_core.tracking import JsonTracker
    from transformer_core.trainer import Trainer, save_checkpoint

    def trainer(name: str, ahead: bool) -> Trainer:
        config = tiny_run_config(fixture_data_dir, packing="on", steps=40, P_drop=0.1)
        torch.manual_seed(0)
        (tmp_path / name).mkdir(exist_ok=True)
        tr = Trainer(config, tmp_path / name, JsonTracker(tmp_path / f"{name}.jsonl"), None)
        tr.lookahead = ahead
        return tr

    plain = trainer("plain", False)  # one trainer at a time: dropout draws from the one global generator
    expected = [plain.train_step()[0] for _ in range(12)]
    ahead = trainer("ahead", True)
    assert [ahead.train_step()[0] for _ in range(6)] == expected[:6]
    assert ahead._ahead is not None and ahead.state()["stream"] != ahead.stream.state()  # saved before the draw
    save_checkpoint(tmp_path / "ahead", ahead.state(), keep=1)
    assert [ahead.train_step()[0] for _ in range(6)] == expected[6:]
    resumed = trainer("ahead", True)
    assert resumed.resume() and resumed.step == 6
    assert [resumed.train_step()[0] for _ in range(6)] == expected[6:]


@pytest.mark.slow
def test_the_device_script_runs_end_to_end_on_a_cpu(tmp_path):
    """benchmarks/gpu_candidates.py --dry-run: every candidate row (or its reason) in the table it writes."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    out = tmp_path / "dry.txt"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_candidates.py"), "--dry-run", "--out", str(out)],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    table = out.read_text()
    for name in ("padded 2x12.5k", "packed 2x12.5k", "packed graphs", "packed graphs flex stack", "stack tuned",
                 "stack bf16", "flex64 stack", "flex blocks", "stack fill", "anchor eager", "anchor compiled",
                 "padded compiled", "share 2 x", "share 3 x", "MPS", "packed compiled", "padded 1x25k",
                 "packed 1x25k"):  # fmt: skip
        assert name in table
    assert "failed" not in table and "commit" in table.splitlines()[0]


@pytest.mark.slow
def test_the_prepared_device_script_runs_every_part_on_a_cpu_and_refuses_an_unknown_part(tmp_path):
    """benchmarks/device/issue56.sh with DRY=1: each part (learning pair, anchor, share, big, tests, kernels,
    candidates) leaves its file, with ray, optuna and mlflow refused as on the device machine, which has none of
    them; an unknown part is refused before any part runs; a TOTAL too short skips every part."""
    import os
    import subprocess

    from tests.helpers import ROOT, gpu_machine_site

    def run(out, **env):
        return subprocess.run(["bash", "benchmarks/device/issue56.sh"], capture_output=True, text=True, timeout=900,
                              cwd=ROOT, env={**os.environ, "DRY": "1", "OUT": str(out), **env})  # fmt: skip

    r = run(tmp_path / "all", PYTHONPATH=str(gpu_machine_site(tmp_path / "site")))
    assert r.returncode == 0, r.stderr[-2000:]
    files = {p.name for p in (tmp_path / "all").iterdir()}
    assert {"packing_learning_dry.txt", "gpu_anchor_dry.txt", "bench_device_dry.txt", "device-bench_dry.json",
            "gpu_tests_dry.txt", "gpu_kernels_dry.txt", "gpu_candidates_dry.txt", "best_sets.txt"} <= files  # fmt: skip
    assert "flex64 stack" in (tmp_path / "all" / "gpu_anchor_dry.txt").read_text()
    assert "2 bench-device measurements of this call stored" in r.stdout and "skipped (" not in r.stdout + r.stderr
    bad = run(tmp_path / "bad", DRY_PARTS="learn,bogus")
    assert bad.returncode == 2 and "unknown part 'bogus'" in bad.stderr and "learning pair" not in bad.stdout
    short = run(tmp_path / "short", DRY_TOTAL="30")
    assert short.returncode == 0 and short.stderr.count("skipped (") == 7 and not any((tmp_path / "short").iterdir())


def test_the_device_script_runs_as_many_learning_trials_at_once_as_the_gpus_memory_holds(tmp_path):
    """The learning pair's six trials at once fit an H200's 140 GiB, not an 80 GB H100's (about 3 x 18 GiB padded
    at one 25k micro-batch and 3 x 12.6 packed): issue56.sh's learn_parallel gives 6 for the H200's memory, 3 for
    the H100's, at least 1, at most 6, and 6 where nvidia-smi gave no number."""
    import subprocess

    from tests.helpers import ROOT

    script = (ROOT / "benchmarks" / "device" / "issue56.sh").read_text()
    body = script[script.index("learn_parallel() {") :]
    body = body[: body.index("\n}\n") + 3]

    import re

    default = int(re.search(r'LEARN_TRIAL_GIB="\$\{LEARN_TRIAL_GIB:-(\d+)\}"', script).group(1))

    def learn_parallel(mib: str, gib: int = default) -> str:
        r = subprocess.run(["bash", "-c", f"{body}\nlearn_parallel '{mib}' {gib}"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    assert learn_parallel("143771") == "6"  # the H200 of the device tool (nvidia-smi's memory.total, MiB)
    assert learn_parallel("81559") == "3"  # an H100 80GB HBM3
    assert learn_parallel("40960") == "1" and learn_parallel("8192") == "1"
    assert learn_parallel("1000000") == "6"
    assert learn_parallel("") == "6" and learn_parallel("[N/A]") == "6"
    assert learn_parallel("81559", 12) == "6"  # LEARN_TRIAL_GIB=12
    for bad in ("LEARN_TRIAL_GIB=18.5", "LEARN_TRIAL_GIB=0", "LEARN_PARALLEL=six"):  # refused before any part runs
        name, value = bad.split("=")
        env = {"PATH": "/usr/bin:/bin", "DRY": "1", "OUT": str(tmp_path / "out"), name: value}
        r = subprocess.run(["bash", "benchmarks/device/issue56.sh"], capture_output=True, text=True, cwd=ROOT, env=env)
        assert r.returncode == 2 and r.stderr.strip() == f"{name}: '{value}' is not allowed (a whole number above 0)"
        assert r.stdout == ""


def _reference_varlen(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None, window_size=(-1, -1),
                      **_):  # fmt: skip
    """varlen_attn's contract on a CPU (torch 2.13's signature: causality as window_size (-1, 0)), segment by
    segment with SDPA: (T, H, D) in and out; a segment with no keys gives zeros, as FlashAttention's kernel
    writes; one longer than max_q or max_k is an error, as there."""
    return _reference(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale, tuple(window_size) == (-1, 0))


def _reference_varlen_is_causal(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, is_causal=False,
                                scale=None, **_):  # fmt: skip
    """The same with torch 2.11's signature (``is_causal`` and ``scale``)."""
    return _reference(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale, is_causal)


def _reference_varlen_unscaled(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False,
                               return_aux=None):  # fmt: skip
    """The same with torch 2.10's signature: ``is_causal``, no ``scale`` (1 / sqrt(head size) always)."""
    return _reference(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, None, is_causal)


def _reference(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale, causal):
    out = torch.zeros_like(query)
    for i in range(len(cu_seq_q) - 1):
        q0, q1, k0, k1 = int(cu_seq_q[i]), int(cu_seq_q[i + 1]), int(cu_seq_k[i]), int(cu_seq_k[i + 1])
        assert q1 - q0 <= max_q and k1 - k0 <= max_k, "a segment longer than max_seqlen"
        if q1 == q0 or k1 == k0:
            continue
        q, k, v = (t.transpose(0, 1)[None] for t in (query[q0:q1], key[k0:k1], value[k0:k1]))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        out[q0:q1] = y[0].transpose(0, 1)
    return out


@pytest.mark.parametrize("signature", [_reference_varlen, _reference_varlen_is_causal, _reference_varlen_unscaled])
@pytest.mark.parametrize("row", sorted(ROWS))
def test_the_varlen_layout_equals_the_padded_step(row, signature, fixture_corpus, monkeypatch):
    """The CUDA path's plumbing (heads as (tokens, h, d), d_k and d_v padded to one size, the tails' pieces
    paired across cross-attention, causality as this torch takes it) on a CPU, with varlen_attn's contract
    computed segment by segment: the same loss and gradients as the padded step."""
    import torch.nn.attention.varlen as varlen

    from transformer_core import segments

    monkeypatch.setattr(varlen, "varlen_attn", signature)
    monkeypatch.setattr(segments, "_VARLEN", varlen)
    arg = "window_size" if signature is _reference_varlen else "is_causal"
    monkeypatch.setattr(segments, "CAUSAL_ARG", arg)
    monkeypatch.setattr(segments, "VARLEN_SCALE", signature is not _reference_varlen_unscaled)
    ref, got, *_ = _padded_and_packed(row, fixture_corpus, "varlen", seed=2)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-4)
    for name in ref[2]:
        torch.testing.assert_close(got[2][name], ref[2][name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    "flex, heads",
    [
        ("flex", dict(d_k=16, d_v=16)),
        ("flex", dict(d_k=16, d_v=32)),
        ("flex64", dict(d_k=64, d_v=64)),
        ("flex64", dict(d_k=128, d_v=128)),  # Table 3's A rows' heads of 128: Hopper's backward default fitted too
    ],
)
def test_on_cuda_flex_attention_equals_the_padded_step_in_bf16(flex, heads, fixture_corpus):
    """FlexAttention compiled (its Triton kernels, forward and backward) against the padded step under bf16
    autocast: the loss and every gradient to bf16's rounding (heads of 16 and more: flex's smallest; 64: the
    paper's, whose backward tiles inductor picks at 128 on Hopper, so flex64 needs compiling.flex_tiles)."""
    split = fixture_corpus.split("train")
    device = torch.device("cuda")
    torch.manual_seed(0)
    cfg = ModelConfig(**{**SMALL, "d_model": 64, **heads})
    model = build_model(cfg, fixture_corpus.vocab_size).to(device).train()
    index = _batch(split)
    padded = ForwardLoss(model, 0.1, device, "bf16")
    batch = collate(split, index)
    inputs, idx, target = padded.prepare((batch.src, batch.tgt_in), batch.tgt_out)
    ref = _loss_and_grads(model, lambda: padded(inputs, idx, target))
    shape = packed_shape(1200, *_lengths(split))
    assert packed_support(model.cfg, device, attention=flex, compile_mode="on")[0] == flex
    packed = PackedForwardLoss(model, 0.1, device, "bf16", "on", flex, shape)
    got = _loss_and_grads(model, lambda: packed(packed.prepare(pack(split, index, shape))))
    torch.testing.assert_close(got[0], ref[0], rtol=2e-2, atol=1e-2)
    for name in ref[2]:  # each gradient within a few percent of the padded one's norm: bf16 products both ways
        diff = (got[2][name] - ref[2][name]).norm() / ref[2][name].norm().clamp_min(1e-12)
        assert diff < 0.05, (name, float(diff))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("row", ["base", "B1", "E1"])
def test_on_cuda_varlen_equals_the_padded_step_in_bf16(row, fixture_corpus):
    """The real FlashAttention varlen kernel against the padded step (its own kernels) under bf16 autocast: the
    loss to bf16's rounding, and a whole packed trial step compiled as a CUDA graph gives a finite loss."""
    split = fixture_corpus.split("train")
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**SMALL, **ROWS[row]}), fixture_corpus.vocab_size).to(device).train()
    index = _batch(split)
    padded = ForwardLoss(model, 0.1, device, "bf16")
    batch = collate(split, index)
    inputs, idx, target = padded.prepare((batch.src, batch.tgt_in), batch.tgt_out)
    ref = _loss_and_grads(model, lambda: padded(inputs, idx, target))
    src_len, tgt_len = _lengths(split)
    shape = packed_shape(1200, src_len, tgt_len)
    assert packed_support(model.cfg, device)[0] == "varlen"
    packed = PackedForwardLoss(model, 0.1, device, "bf16", "off", "varlen", shape)
    pb = pack(split, index, shape)
    got = _loss_and_grads(model, lambda: packed(packed.prepare(pb)))
    torch.testing.assert_close(got[0], ref[0], rtol=2e-2, atol=1e-2)
    graphs = PackedForwardLoss(model, 0.1, device, "bf16", "graphs", "varlen", shape)
    for _ in range(3):
        loss, nll = graphs(graphs.prepare(pb))
        loss.backward()
        assert torch.isfinite(loss.detach()) and torch.isfinite(nll)
    torch.testing.assert_close(loss.detach(), ref[0], rtol=2e-2, atol=1e-2)


def test_flex64_kernels_take_tiles_that_divide_64_and_only_while_a_flex64_step_is_the_processs():
    """Inductor's own FlexAttention configurations (its Hopper backward default has tiles of 128) fitted to a
    64-token block mask; the fitting reaches inductor's choices (here its CPU ones, fitted to 8) and only while
    asked for: a later step at FlexAttention's own tiles gets inductor's configurations back."""
    from torch._inductor.choices import InductorChoices
    from torch._inductor.template_heuristics.triton import FlexBwDConfig, FlexConfig

    from transformer_core.compiling import fit_tiles, flex_tiles, flex_tiles_why

    assert fit_tiles([FlexBwDConfig(64, 128, 128, 64, 3, 8)], 64) == [FlexBwDConfig(64, 64, 64, 64, 3, 4)]
    assert fit_tiles([FlexConfig(128, 128, 3, 4), FlexConfig(64, 64, 3, 4)], 64) == [FlexConfig(64, 64, 3, 4)]
    assert fit_tiles([FlexBwDConfig(32, 64, 64, 32, 1, 8)], 64) == [FlexBwDConfig(32, 64, 64, 32, 1, 8)]
    assert flex_tiles_why() is None

    def forward_configs():  # inductor's forward tiles for a CPU (128 by 64 in torch 2.13)
        return InductorChoices().get_flex_attention_fwd_configs(64, torch.bfloat16, "cpu")

    own = forward_configs()
    with pytest.raises(ValueError, match="power of two"):
        flex_tiles(48)
    try:
        flex_tiles(16)
        fitted = forward_configs()
        assert fitted and all(c.block_m <= 16 and c.block_n <= 16 for c in fitted)
    finally:
        flex_tiles(None)
    assert forward_configs() == own != fitted


def test_a_flex64_step_sets_the_tiles_and_a_flex_step_after_it_unsets_them():
    from transformer_core import compiling

    model = build_model(ModelConfig(**SMALL), 100)
    shape = packed_shape(200, np.array([5, 9]), np.array([6, 8]))
    try:
        PackedForwardLoss(model, 0.1, torch.device("cpu"), "fp32", "on", "flex64", shape)
        assert compiling._FLEX_TILE[0] == 64
        PackedForwardLoss(model, 0.1, torch.device("cpu"), "fp32", "on", "flex", shape)
        assert compiling._FLEX_TILE[0] is None
    finally:
        compiling.flex_tiles(None)


def test_the_device_scripts_only_names_a_candidate_exactly_or_selects_by_a_part_of_names():
    from benchmarks.gpu_candidates import CANDIDATES, wanted

    stack = "packed graphs flex stack"
    picked = [n for n in CANDIDATES if wanted(f"{stack},anchor", n)]
    assert picked == [stack] and wanted("anchor", "anchor compiled") and wanted("anchor", "anchor eager")
    assert not wanted(stack, f"share 2 x {stack}, MPS") and wanted("share", f"share 2 x {stack}, MPS")
    assert wanted("stack bf16", "packed graphs flex stack bf16") and not wanted("stack bf16", stack)
    assert all(wanted(None, n) for n in CANDIDATES) and wanted("", "anchor eager") and wanted(" , ", "anchor eager")
