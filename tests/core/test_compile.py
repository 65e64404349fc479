"""The compile and fused_adam knobs: the same training as the eager step, and eager where no compiler is found."""

import itertools
import logging
import os

import pytest
import torch

from transformer_core.compiling import inductor_compiler, resolve_compile
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.trainer import Trainer

TINY = {"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "d_k": 16, "d_v": 16, "vocab": 1000, "tokens_per_batch": 256}
TINY.update(steps=100, warmup=10, threads=1, device="cpu", precision="fp32", seed=3)


def _losses(tmp_path, fixture_data_dir, steps: int, **knobs) -> tuple[list[float], Trainer]:
    config = make_run_config({**TINY, "data_dir": str(fixture_data_dir), **knobs})
    tr = Trainer(config, tmp_path, JsonTracker(tmp_path / "t.jsonl"), None)
    return [tr.train_step()[0] for _ in range(steps)], tr


def test_knobs_leave_the_trial_id(tmp_path):
    base = make_run_config(TINY)
    fast = make_run_config({**TINY, "compile": "on", "fused_adam": True})
    assert base.content_hash() == fast.content_hash()


def test_no_compiler_trains_eagerly_with_one_line(tmp_path, fixture_data_dir, caplog):
    import torch._inductor.config as inductor_config

    with inductor_config.patch({"cpp.cxx": ("no-such-c++-compiler",)}):
        assert inductor_compiler() is None
        with caplog.at_level(logging.WARNING, logger="transformer_core.compiling"):
            losses, tr = _losses(tmp_path, fixture_data_dir, 2, compile="on")
    assert tr.forward_loss.mode == "off" and tr.compile_seconds is None
    lines = [r.getMessage() for r in caplog.records if r.name == "transformer_core.compiling"]
    assert len(lines) == 1 and "no C++ compiler" in lines[0] and "no-such-c++-compiler" in lines[0]
    eager, _ = _losses(tmp_path / "eager", fixture_data_dir, 2)
    assert losses == eager  # the fallback is the eager step itself


def test_auto_is_eager_on_every_device():
    """auto is off: slower than eager on a CPU; faster on an H200 but not shown to learn alike (compiling.py)."""
    assert resolve_compile("auto", torch.device("cpu")) == "off"
    assert resolve_compile("auto", torch.device("cuda")) == "off"
    assert resolve_compile("off", torch.device("cpu")) == "off"
    assert resolve_compile("on", torch.device("cuda")) == "on"  # asked for, it is what runs


def test_fused_adam_is_the_default_and_trains_like_the_loop(tmp_path, fixture_data_dir):
    loop, tr_loop = _losses(tmp_path / "loop", fixture_data_dir, 6, fused_adam=False)
    fused, tr = _losses(tmp_path / "fused", fixture_data_dir, 6)
    assert tr.opt.defaults.get("fused") is True and not tr_loop.opt.defaults.get("fused")
    assert loop[0] == fused[0]  # the first loss comes before any update
    assert fused == pytest.approx(loop, rel=1e-4)
    again, _ = _losses(tmp_path / "again", fixture_data_dir, 6)
    assert again == fused  # deterministic per seed


def test_a_device_without_a_fused_kernel_runs_the_loop_with_one_line(caplog, monkeypatch):
    from transformer_core import optim

    real = torch.optim.Adam

    def no_fused(params, **kw):
        if kw.get("fused"):
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")
        return real(params, **kw)

    monkeypatch.setattr(torch.optim, "Adam", no_fused)
    with caplog.at_level(logging.WARNING, logger="transformer_core.optim"):
        opt = optim.make_adam(torch.nn.Linear(2, 2).parameters(), fused=True)
    assert not opt.defaults.get("fused") and len(caplog.records) == 1 and "per-parameter loop" in caplog.text


@pytest.mark.slow
@pytest.mark.skipif(inductor_compiler() is None, reason="no C++ compiler for inductor")
def test_compiled_step_trains_like_eager(tmp_path, fixture_data_dir):
    """Dropout on (P_drop 0.1): the compiled step draws the same masks from torch's generator."""
    eager, _ = _losses(tmp_path / "eager", fixture_data_dir, 4)
    compiled, tr = _losses(tmp_path / "compiled", fixture_data_dir, 4, compile="on")
    assert tr.forward_loss.mode == "on" and tr.compile_seconds > 0
    assert compiled == pytest.approx(eager, rel=1e-4)
    again, _ = _losses(tmp_path / "again", fixture_data_dir, 4, compile="on")
    assert again == compiled  # deterministic per seed


def _forward_loss(tmp_path, fixture_data_dir):
    config = make_run_config({**TINY, "data_dir": str(fixture_data_dir)})
    tr = Trainer(config, tmp_path, JsonTracker(tmp_path / "t.jsonl"), None)
    tr.model.eval()  # no dropout: the same inputs give the same loss
    from transformer_core.data import PAD

    batches = itertools.islice(tr.stream, 200)
    padded = next((b for b in batches if (b.tgt_out == PAD).any() and (b.src == PAD).any()), None)
    assert padded is not None  # a batch with padding on both sides, or the tests show nothing
    return tr, padded


def test_prepare_picks_the_real_target_positions(tmp_path, fixture_data_dir):
    from transformer_core.data import PAD

    tr, batch = _forward_loss(tmp_path, fixture_data_dir)
    fl = tr.forward_loss
    inputs, index, target = fl.prepare(tr.task.inputs(batch), batch.tgt_out)
    real = batch.tgt_out != PAD
    assert torch.equal(target, batch.tgt_out[real])
    assert torch.equal(index, real.flatten().nonzero().squeeze(1))
    loss, nll = fl(inputs, index, target)
    with torch.no_grad():
        logits = tr.model(batch.src, batch.tgt_in)[real]  # the boolean-mask way the step used to pick them
        ref = torch.nn.functional.cross_entropy(logits, batch.tgt_out[real], reduction="sum")
    assert float(nll) == pytest.approx(float(ref), rel=1e-5)
    assert float(loss.detach()) != pytest.approx(float(nll), rel=1e-5)  # label smoothing is in the loss


def test_padding_lengths_to_a_multiple_of_8_leaves_the_loss(tmp_path, fixture_data_dir):
    """The compiled step on a GPU right-pads lengths to a multiple of 8; the masks keep every real position."""
    tr, batch = _forward_loss(tmp_path, fixture_data_dir)
    fl = tr.forward_loss
    plain = fl(*fl.prepare(tr.task.inputs(batch), batch.tgt_out))
    fl.pad_to = 8
    inputs, index, target = fl.prepare(tr.task.inputs(batch), batch.tgt_out)
    assert all(x.shape[1] % 8 == 0 for x in inputs) and any(
        x.shape[1] > y.shape[1] for x, y in zip(inputs, tr.task.inputs(batch))
    )
    padded = fl(inputs, index, target)
    assert [float(v.detach()) for v in padded] == pytest.approx([float(v.detach()) for v in plain], rel=1e-5)
    from transformer_core.compiling import _pad_length

    ids = torch.ones(2, 13, dtype=torch.long)
    assert [_pad_length(ids, 8, limit).shape[1] for limit in (1024, 14, 13)] == [16, 14, 13]  # never past max_len


def test_a_step_reads_the_device_once(tmp_path, fixture_data_dir, monkeypatch):
    """Two micro-batches, one read: on a GPU every read makes the host wait for the device."""
    config = make_run_config({**TINY, "data_dir": str(fixture_data_dir), "accumulate": 2, "fused_adam": True})
    tr = Trainer(config, tmp_path, JsonTracker(tmp_path / "t.jsonl"), None)
    expected = tr.train_step()
    reads = []

    def no_read(self, *a):
        raise AssertionError("a scalar read of a tensor during the step")

    def counted(self):
        reads.append(tuple(self.shape))
        return real_tolist(self)

    real_tolist = torch.Tensor.tolist
    for name in ("__float__", "item", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, no_read)
    monkeypatch.setattr(torch.Tensor, "tolist", counted)
    loss, nll, ntok = tr.train_step()
    monkeypatch.undo()
    assert reads == [(4,)]  # (loss, NLL) of each micro-batch, stacked
    assert ntok > 0 and loss > nll > 0 and (loss, nll) != expected[:2]


def test_every_compiled_step_tags_the_cache_key_with_its_instruction_set(fixture_data_dir, tmp_path):
    import torch.compiler.config as compiler_config
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    from transformer_core.compiling import isa_cache_tag

    with compiler_config.patch(cache_key_tag="users-own"):
        tag = isa_cache_tag()
        assert tag.startswith("users-own,isa-") and str(pick_vec_isa()).split()[0] in tag  # the user's tag kept
        assert isa_cache_tag() == tag  # once, however many steps compile in the process
    for knobs in ({"compile": "on"}, {"compile": "on", "packing": "on"}):  # the padded and the packed step
        with compiler_config.patch(cache_key_tag=""):
            _losses(tmp_path / str(len(knobs)), fixture_data_dir, 0, **knobs)
            assert compiler_config.cache_key_tag.startswith("isa-")
        with compiler_config.patch(cache_key_tag=""):
            _losses(tmp_path / f"eager{len(knobs)}", fixture_data_dir, 0)
            assert compiler_config.cache_key_tag == ""  # an eager step compiles nothing


_COMPILED_LOSS = """
import sys, torch, torch.nn.functional as F
from transformer_core.compiling import isa_cache_tag
from transformer_core.loss import smoothed_terms
torch.set_num_threads(1)
if sys.argv[1] == "guarded":
    isa_cache_tag()
g = torch.Generator().manual_seed(0)
x, t = torch.randn(256, 3000, generator=g), torch.randint(0, 3000, (256,), generator=g)
f = lambda x: smoothed_terms(F.log_softmax(x, dim=-1), t, 0.1)[0].sum()
eager = f(x)
print(abs(float(torch.compile(f, dynamic=False)(x) - eager)) / float(eager))
"""


@pytest.mark.slow
@pytest.mark.parametrize("first", ["native", "avx2"])
def test_compiled_losses_under_native_and_imitated_avx2_sharing_one_cache_are_right(tmp_path, first):
    """Two processes with one inductor cache directory, one compiling for this CPU's own instruction set and one
    imitating AVX2 (ATEN_CPU_CAPABILITY=avx2, as the project's measurements of other CPUs do), in either order:
    each one's compiled loss equals its eager loss (without the tag, torch 2.13 handed the second process the
    first one's kernels: off by thousands on an AVX512 machine)."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("ATEN_CPU_CAPABILITY", None)
    avx2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

    def relative_error(extra: dict) -> float:
        r = subprocess.run([sys.executable, "-c", _COMPILED_LOSS, "guarded"], env={**env, **extra}, cwd=ROOT,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        return float(r.stdout.strip().splitlines()[-1])

    for extra in ({}, avx2) if first == "native" else (avx2, {}):
        assert relative_error(extra) < 1e-5


def test_without_a_cpp_compiler_the_tag_is_atens_instruction_set(monkeypatch):
    """A CUDA-only host may have no C++ compiler for inductor to check instruction sets with (pick_vec_isa then
    raises): the tag is ATen's choice of instruction set."""
    import torch._inductor.cpu_vec_isa as vec_isa
    import torch.compiler.config as compiler_config
    from torch._inductor.exc import InvalidCxxCompiler

    from transformer_core.compiling import isa_cache_tag

    def no_compiler():
        raise InvalidCxxCompiler()

    monkeypatch.setattr(vec_isa, "pick_vec_isa", no_compiler)
    with compiler_config.patch(cache_key_tag=""):
        assert isa_cache_tag() == "isa-" + torch.backends.cpu.get_cpu_capability()
