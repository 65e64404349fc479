"""The compile and fused_adam knobs: the same training as the eager step, and eager where no compiler is found."""

import logging

import pytest
import torch

from transformer_core.compiling import inductor_compiler, resolve_compile
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.train import Trainer

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
    """auto is off: the compiled step was measured slower than eager on a CPU and on an H200 (compiling.py)."""
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
