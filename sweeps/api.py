"""A sweep in a notebook: ``load_sweep(DIR)`` gives its trials, per-seed results, learning curves and verdicts as
pandas DataFrames, for an ablation sweep (rows of a table) and a search sweep (sampled configurations) alike.

    from sweeps import load_sweep
    s = load_sweep("sweep_runs/table3-cpu")        # a local directory or the sweep's URI
    s.trials                                       # one row per trial: row, seed, knobs, status, metrics, cost
    s.results.groupby("row")["dev_bleu"].mean()    # per seed: the numbers every mean and verdict is made of
    s.curves.pivot_table("dev_ce", "step", "row")  # dev cross-entropy at every evaluation point
    s.verdicts                                     # the claims judged, each with its verdict (a search too)

Everything is read from what the sweep left on disk (analysis.collect) and judged by the report's own functions
(analysis.tables.judge_report, analysis.search); nothing here computes a number of its own.  Each frame is
computed when first asked for and kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from analysis.adaptive_record import read_adaptive
from analysis.collect import collect
from analysis.files import read_text
from analysis.report_model import report_shape, seed_table
from analysis.search import configurations
from analysis.search_report import is_search_sweep, objectives
from analysis.search_verdicts import confirmation_table, verdict_words
from analysis.tables import judge_report
from analysis.trajectory import eval_records
from analysis.verdicts import sweep_rule

from .storage import local_view

CURVE_KEYS = ("dev_ce", "dev_ppl", "dev_bleu", "dev_bpb")
UNCONFIRMED = "not confirmed: ranked by the search's own score (optimistic: each was picked as a maximum)"


@dataclass
class Sweep:
    """One sweep's results.  ``kind`` is "search" (a searcher sampled its configurations) or "ablation"."""

    path: Path  # the local directory read (a URI sweep: its pulled view)
    state: dict = field(repr=False)  # sweep.json

    @property
    def name(self) -> str:
        return str(self.state.get("name"))

    @cached_property
    def trials(self) -> pd.DataFrame:
        """One row per trial, finished or not (analysis.collect): ids, row (a search: its sample), seed, knobs in
        run units and paper units (paper_*), sampled values (a search), status, metrics, cost, workdir."""
        return collect(self.path)

    @cached_property
    def kind(self) -> str:
        return "search" if is_search_sweep(self.path, self.trials) else "ablation"

    @cached_property
    def results(self) -> pd.DataFrame:
        """Per seed: every trial's row, seed, status and readings (dev_ce = ln dev PPL), as the verdicts use them."""
        return seed_table(self.trials) if len(self.trials) else pd.DataFrame()

    @cached_property
    def curves(self) -> pd.DataFrame:
        """Long format: one line per trial and evaluation point (trial_id, row, seed, step and the dev readings)."""
        rows = []
        for _, t in self.trials.iterrows():
            for e in eval_records(t["workdir"]):
                rec = {"trial_id": t["trial_id"], "row": t["row"], "seed": t["seed"], "step": e.get("step")}
                rec.update({k: e.get(k) for k in CURVE_KEYS})
                rows.append(rec)
        return pd.DataFrame(rows, columns=["trial_id", "row", "seed", "step", *CURVE_KEYS])

    @cached_property
    def configurations(self) -> pd.DataFrame:
        """A search: one row per sampled configuration (mean and seed sd of each objective, cost, rank), ranked: rank 1
        (the best mean on the first objective) first, configurations without a result last."""
        if self.kind != "search":
            raise AttributeError(f"sweep {self.name!r} is an ablation sweep: it has rows, not sampled configurations")
        ranked = configurations(self.trials, objectives(self.state))
        return ranked.sort_values("rank", kind="stable", na_position="last").reset_index(drop=True)

    @cached_property
    def verdicts(self) -> pd.DataFrame:
        """An ablation: the claims its spec stated judged (one line per claim and reading), as in the report.  A search:
        the confirmation of its best configurations with fresh seeds where it ran one, else the configurations
        ranked by the first objective; either way with a ``verdict`` column: the confirmation's verdict on the
        winner's line (the report's "Verdict:" sentence, analysis.search_verdicts.verdict_words), what the other
        lines are to it, or that the ranking is the search's own, optimistic one."""
        if self.kind == "search":
            confirmed = confirmation_table(self.trials, self.configurations, objectives(self.state)[0])
            if confirmed is None:
                return self.configurations.assign(verdict=UNCONFIRMED)
            c = confirmed.attrs.get("comparison")
            winner = c.a if c is not None else None
            words = [verdict_words(confirmed) if c is None or s == winner else
                     f"one of the rest {winner} was judged against" if n else "not judged: no fresh seed finished"
                     for s, n in zip(confirmed["sample"], confirmed["fresh_seeds"])]  # fmt: skip
            return confirmed.assign(verdict=words)
        return self._judged[0]

    @cached_property
    def versus_base(self) -> pd.DataFrame:
        """An ablation: each row no claim covers against base, per reading (the report's "each row against base")."""
        if self.kind == "search":
            return pd.DataFrame()
        return self._judged[1]

    @cached_property
    def _judged(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        stated = list(report_shape(self.state, repr(str(self.path))).claims)  # the claims its spec stated
        adaptive = read_adaptive(self.state.get("adaptive"), repr(str(self.path)))  # typed (old records migrated)
        return judge_report(self.trials, sweep_rule(adaptive), claims=stated)


def load_sweep(location: str | Path) -> Sweep:
    """The sweep in a directory (the --out of ``tsweep run``) or at a URI (pulled to a local view first)."""
    path = Path(local_view(location))
    try:
        state = json.loads(read_text(path / "sweep.json"))  # a regular file of a bounded size
    except (OSError, ValueError):
        state = None
    if not isinstance(state, dict):
        collect(path)  # names what is wrong in one line (no sweep.json, or an unreadable one)
        raise ValueError(f"{str(location)!r}: sweep.json is not a JSON object")
    return Sweep(path, state)
