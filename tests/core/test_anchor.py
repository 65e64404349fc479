"""The GPU benchmark's nn.Transformer anchor runs (tiny, on the CPU): the script a GPU session runs is not broken."""

import sys

from tests.helpers import ROOT


def test_the_anchor_trains_a_step_and_reports_its_rate():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from anchor_transformer import anchor_rate

    r = anchor_rate(vocab=50, d_model=16, d_ff=32, h=2, layers=1, tokens=112, steps=2, warmup=1, device="cpu",
                    bf16=False)  # fmt: skip
    assert r["tokens_per_step"] == 112 and r["tokens_per_second"] > 0 and 1.0 < r["loss"] < 100.0
    assert r["params"] > 50 * 16  # the tied embedding and the layers
