"""A sweep in a notebook: ``load_sweep(DIR)`` gives its trials, per-seed results, learning curves and verdicts as
pandas DataFrames, for an ablation sweep (rows of a table) and a search sweep (sampled configurations) alike.

    from sweeps import load_sweep
    s = load_sweep("sweep_runs/table3-cpu")        # a local directory or the sweep's URI
    s.trials                                       # one row per trial: row, seed, knobs, status, metrics, cost
    s.results.groupby("row")["dev_bleu"].mean()    # per seed: the numbers every mean and verdict is made of
    s.curves.pivot_table("dev_ce", "step", "row")  # dev cross-entropy at every evaluation point
    s.verdicts                                     # the claims judged, each with its verdict (a search too)

Everything is read from what the sweep left on disk (analysis.data.collect) and judged by the report's own functions
(analysis.report.tables.judge_report, analysis.stats.search); nothing here computes a number of its own.  Each frame is
computed when first asked for and kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from analysis.data.collect import collect
from analysis.data.metrics import CURVE_KEYS
from analysis.data.sweep_record import SweepState, require_record
from analysis.report.model import seed_table
from analysis.report.search_report import is_search_sweep, objectives
from analysis.report.tables import judge_report
from analysis.stats.rule import sweep_rule
from analysis.stats.search import configurations
from analysis.stats.search_verdicts import confirmation_table, verdict_words
from analysis.stats.trajectory import eval_records
from sweeps.state.storage import local_view

UNCONFIRMED = "not confirmed: ranked by the search's own score (optimistic: each was picked as a maximum)"


@dataclass
class Sweep:
    """One sweep's results.  ``kind`` is "search" (a searcher sampled its configurations) or "ablation"."""

    path: Path  # the local directory read (a URI sweep: its pulled view)
    record: SweepState = field(repr=False)  # sweep.json, read and checked once (analysis.data.sweep_record)

    @property
    def state(self) -> dict:
        """sweep.json as it holds the record (a dict)."""
        return dict(self.record.raw)

    @property
    def name(self) -> str:
        return self.record.name

    @cached_property
    def trials(self) -> pd.DataFrame:
        """One row per trial, finished or not (analysis.data.collect): ids, row (a search: its sample), seed, knobs in
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
        winner's line (the report's "Verdict:" sentence, analysis.stats.search_verdicts.verdict_words), what the other
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
        stated = list(self.record.shape().claims)  # the claims its spec stated
        adaptive = self.record.adaptive  # typed (old records migrated)
        return judge_report(self.trials, sweep_rule(adaptive), claims=stated)


def load_sweep(location: str | Path) -> Sweep:
    """The sweep in a directory (the --out of ``tsweep run``) or at a URI (pulled to a local view first)."""
    path = Path(local_view(location))
    return Sweep(path, require_record(path, repr(str(location))))  # one line where it is missing or unreadable
