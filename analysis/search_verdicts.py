"""What a search's winner is worth: the Pareto front of two objectives, and the confirmation of the best
configurations with fresh seeds judged by the verdict engine (analysis.verdicts)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from transformer_core.rundir import Status

from .samples import CONFIRM_GROUP
from .search import Objective


def pareto_front(configs: pd.DataFrame, objectives: list[Objective]) -> list[str]:
    """The samples no other configuration dominates (at least as good on every objective, better on one)."""
    scored = configs.dropna(subset=[o.metric for o in objectives])
    pts = np.column_stack([o.sign * scored[o.metric].astype(float).to_numpy() for o in objectives])
    front = []
    for i, p in enumerate(pts):
        dominated = np.any(np.all(pts >= p, axis=1) & np.any(pts > p, axis=1))
        if not dominated:
            front.append(scored["sample"].iloc[i])
    return front


def confirmation_table(df: pd.DataFrame, configs: pd.DataFrame, objective: Objective) -> pd.DataFrame | None:
    """The configurations re-run with fresh seeds after the search, or None when there are none."""
    confirm = df[(df["group"] == CONFIRM_GROUP) & (df["status"] == Status.FINISHED)]
    if not len(confirm):
        return None
    raise NotImplementedError


def confirmation_lines(table: pd.DataFrame, objective: Objective) -> list[str]:
    return []
