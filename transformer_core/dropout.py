"""Dropout whose CPU masks cost less than torch's (opt-in: ``fast_dropout=true``).

On a CPU ``torch.nn.functional.dropout`` draws its mask with ``bernoulli_``, one generator call per element
through a per-element Bernoulli transform; on the cpu profile's base row that was 6% of a training step
(benchmarks/results/step_profile.txt).  ``Dropout`` here draws one 31-bit integer per element from the same
generator (``random_`` on int32) and keeps the element where it is at least round(p * 2^31): the drop
probability is p to within 2^-32, the kept elements are scaled by 1 / (1 - p) as torch's are, and the masks
follow ``torch.manual_seed`` and the checkpointed generator state exactly as torch's do, but they are other
masks than torch's for the same seed.  Under bf16 the kept elements are scaled by the float 1 / (1 - p); torch's
CPU dropout multiplies by that scale rounded to bf16 (1.109375 for p = 0.1, kept values 0.16% short).

Measured (benchmarks/README.md, "Dropout masks"): one dropout's forward and backward 1.43x faster, but the
whole step no faster within what repeats differ by (0.98-1.01x), and learning within seed noise over three full
base trials.  It is therefore off by default: torch's masks keep trials reproducible per seed against the
results published before it.  Elsewhere (CUDA, MPS), under torch.compile (which would break its graph
at every in-place ``random_``) and with ``fast`` false (the run-only knob ``fast_dropout``), it is ``F.dropout``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_RANGE = 2**31  # int32 random_() draws uniformly from [0, 2^31)


def keep_threshold(p: float) -> int:
    """The smallest 31-bit draw that keeps an element: drop probability round(p * 2^31) / 2^31."""
    return int(round(p * _RANGE))


def cpu_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout of ``x`` (training) with masks from int32 draws; the gradient is the same mask."""
    if p <= 0.0:
        return x
    if p >= 1.0:
        return x * 0.0
    draws = torch.empty(x.shape, dtype=torch.int32, device=x.device).random_()
    keep = (draws >= keep_threshold(p)).to(x.dtype)  # 0 or 1, exact in any dtype
    return x * keep * (1.0 / (1.0 - p))  # the scale as a float scalar: a bf16 mask would round 1/0.9 to 1.109


class Dropout(nn.Module):
    """``nn.Dropout`` (not in place), with the CPU masks above where ``fast`` is set and x is on a CPU."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability {p}: allowed 0 to 1")
        self.p = p
        self.fast = False  # the trainer sets it from the run-only knob fast_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.fast and x.device.type == "cpu" and not torch.compiler.is_compiling():
            return cpu_dropout(x, self.p)  # (torch.compile cannot trace random_ in place: it would split the graph)
        return F.dropout(x, self.p, True)

    def extra_repr(self) -> str:
        return f"p={self.p}, fast={self.fast}"


def set_fast_dropout(model: nn.Module, fast: bool) -> None:
    """Set every ``Dropout`` of ``model`` to the int32 CPU masks (True) or torch's (False)."""
    for m in model.modules():
        if isinstance(m, Dropout):
            m.fast = fast
