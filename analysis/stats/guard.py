"""The e-value's guard on the two rows' own spread (``Rule(evidence="e")``): beside the safe t-test on the noise
model's standard error, the same test on Welch's t of the two rows alone, each row's own seed variance floored at
the noise model's for it, on Welch-Satterthwaite's df; the comparison's e-value is the smaller of the two
(evalues.guarded_evalue).  A rule carries its guard; this is the report's, and benchmarks/guards.py measures
variants of it (shrunk toward the model's, none) against it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Guard:
    on: ClassVar[bool] = True  # False: the noise model's e-value alone, unguarded

    def variances(self, own: Sequence[tuple[int, float]], floor: Sequence[float]) -> tuple[float, ...]:
        """Each row's variance for the guard, from its own (df, variance) and the noise model's variance for it:
        the larger, so nothing is shared between the two rows or borrowed to shrink a noisy one."""
        return tuple(max(s2, f) for (_, s2), f in zip(own, floor))

    def dof(self, na: int, nb: int, var_a: float, var_b: float) -> float:
        """Welch-Satterthwaite's df of var_a/na + var_b/nb on the rows' own na - 1 and nb - 1 df."""
        return welch_dof(var_a / na, var_b / nb, na - 1, nb - 1)

    def describe(self) -> str:
        """Words for the decision rule's sentence where this is not the report's guard (the report's has none)."""
        return ""


def welch_dof(a: float, b: float, df_a: float, df_b: float) -> float:
    """Welch-Satterthwaite's df of a + b, two variances of means estimated on df_a and df_b (their sum where both
    are 0)."""
    if a + b == 0:
        return float(df_a + df_b)
    return (a + b) ** 2 / (a**2 / df_a + b**2 / df_b)
