"""Variants of the e-value's guard, for measuring what the report's guard costs (benchmarks/evalue_ceiling.py):
each row's own variance shrunk toward the noise model's on d prior df instead of floored at it, or no guard at all.
Measuring only: the report uses analysis.stats.guard.Guard, and nothing in the library knows these."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from analysis.stats.guard import Guard, welch_dof


@dataclass(frozen=True)
class Shrunk(Guard):
    """Each row's variance (d floor + (n - 1) own) / (d + n - 1) on d + n - 1 df: an e-value only where row
    variances scatter as a scaled inverse chi-square on d df around the model's (a 3x-spread row is not
    controlled by it)."""

    prior_df: float = 1.0

    def __post_init__(self):
        if not self.prior_df > 0:
            raise ValueError(f"guard: prior df {self.prior_df!r}; allowed a number > 0")

    def variances(self, own, floor):
        d = self.prior_df
        return tuple((d * f + k * s2) / (d + k) for (k, s2), f in zip(own, floor))

    def dof(self, na, nb, var_a, var_b):
        return welch_dof(var_a / na, var_b / nb, na - 1 + self.prior_df, nb - 1 + self.prior_df)

    def describe(self) -> str:
        return f" (the guard's variances shrunk to the model's on {self.prior_df:g} prior df)"


@dataclass(frozen=True)
class Unguarded(Guard):
    """No guard: the noise model's e-value alone."""

    on: ClassVar[bool] = False

    def describe(self) -> str:
        return " (no guard: the noise model's e-value alone)"


def guard(prior_df: float) -> Guard:
    """The report's guard at 0, ``Shrunk`` on d > 0 prior df, ``Unguarded`` at inf."""
    if prior_df == 0:
        return Guard()
    return Unguarded() if math.isinf(prior_df) else Shrunk(prior_df)
