"""The int32-mask dropout (transformer_core/dropout.py): torch's dropout in distribution, other masks per seed."""

import pytest
import torch
import torch.nn.functional as F

from transformer_core.dropout import Dropout, cpu_dropout, keep_threshold, set_fast_dropout
from transformer_core.run_config import make_run_config
from transformer_core.tracking import JsonTracker
from transformer_core.trainer import Trainer

from .test_compile import TINY


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_drop_rate_and_scale_are_torchs(p):
    torch.manual_seed(0)
    x = torch.ones(1_000_000)
    y = cpu_dropout(x, p)
    dropped = (y == 0).double().mean().item()
    # 1e6 draws: the rate's sd is sqrt(p(1-p)/n) <= 5e-4, so +-0.003 is 6 sd or more; a threshold off by half
    # (p/2 or 2p) misses the band by 0.05 or more
    assert abs(dropped - p) < 0.003
    kept = y[y != 0]
    assert torch.allclose(kept, torch.full_like(kept, 1.0 / (1.0 - p)))  # inverted dropout: kept / (1 - p)
    assert abs(y.mean().item() - 1.0) < 0.004  # E[y] = x


def test_threshold_is_p_in_31_bits():
    assert keep_threshold(0.1) == round(0.1 * 2**31)
    draws = torch.empty(200_000, dtype=torch.int32).random_()
    assert draws.min() >= 0 and draws.max() >= 2**31 - 2**22  # the 31-bit range the threshold assumes


def test_gradient_is_the_mask_and_masks_follow_the_seed():
    x = torch.randn(64, 32, requires_grad=True)
    torch.manual_seed(5)
    y = cpu_dropout(x, 0.2)
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() / 0.8)
    torch.manual_seed(5)
    again = cpu_dropout(x.detach(), 0.2)
    assert torch.equal(again, y.detach())  # same seed, same mask
    torch.manual_seed(6)
    assert not torch.equal(cpu_dropout(x.detach(), 0.2), y.detach())


def test_module_is_identity_in_eval_and_torchs_when_not_fast():
    m = Dropout(0.3)
    assert m.fast is False  # off unless the run sets fast_dropout
    x = torch.randn(8, 16)
    assert torch.equal(m.eval()(x), x)
    m.train()
    m.fast = False
    torch.manual_seed(1)
    ours = m(x)
    torch.manual_seed(1)
    assert torch.equal(ours, F.dropout(x, 0.3, True))  # fast off: torch's own masks, bit for bit
    with pytest.raises(ValueError, match="allowed 0 to 1"):
        Dropout(1.5)


def test_knob_reaches_every_dropout_and_the_result(tmp_path, fixture_data_dir):
    runs = {}
    for fast in (True, False):
        config = make_run_config({**TINY, "data_dir": str(fixture_data_dir), "fast_dropout": fast})
        tr = Trainer(config, tmp_path / str(fast), JsonTracker(tmp_path / f"{fast}.jsonl"), None)
        drops = [m for m in tr.model.modules() if isinstance(m, Dropout)]
        assert drops and all(m.fast is fast for m in drops)
        runs[fast] = [tr.train_step()[0] for _ in range(3)]
    assert runs[True] != runs[False]  # other masks, so another (equally likely) loss curve
    assert make_run_config(TINY).train.fast_dropout is False  # torch's masks by default
    assert make_run_config({**TINY, "fast_dropout": False}).content_hash() == make_run_config(TINY).content_hash()


def test_set_fast_dropout_flips_modules():
    model = torch.nn.Sequential(Dropout(0.1), torch.nn.Linear(2, 2), Dropout(0.2))
    set_fast_dropout(model, False)
    assert [m.fast for m in model if isinstance(m, Dropout)] == [False, False]


def test_compiled_dropout_is_one_graph():
    m = Dropout(0.1).train()
    m.fast = True
    explained = torch._dynamo.explain(lambda x: m(x) * 2)(torch.randn(4, 8))
    assert explained.graph_break_count == 0  # random_ in place would split a compiled step at every dropout


def test_bf16_kept_values_are_scaled_as_torchs():
    x = torch.randn(4096).bfloat16()
    y = cpu_dropout(x, 0.1)
    kept = y != 0
    # torch's dropout multiplies by the float 1/0.9; a bf16 mask would hold 1.109375 and shrink every kept value
    assert torch.equal(y[kept], (x[kept].float() * (1.0 / 0.9)).bfloat16())
