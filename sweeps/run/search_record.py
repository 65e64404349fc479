"""A search's outcome where the user's other tools look: the Optuna study (user attributes optuna-dashboard shows
beside its Best Trial) and the sweep's MLflow parent run (tags), written by the driver when the search and its
confirmation round have ended (runner.run_sweep).  Every number is the search report's own, computed by the same
functions on the same trials:

- study attributes ``confirmation.*`` and parent tags ``search.*``: the winner (its sample id and knob values), its
  search score (the value the study holds for it: optimistic, the best of noisy samples), and with
  ``search.confirm`` its confirmed value, 95% interval and fresh seeds, the verdict against the best of the other
  confirmed configurations (analysis.stats.search_verdicts) and a note where the confirmed value differs from the search
  score;
- study attributes ``importance.<evaluator>``: each parameter's importance by the report's evaluators (the
  report's point values, analysis.stats.search.importance) with its method named.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)
IMPORTANCE_ATTR = "importance"  # study attribute importance.<evaluator>: {"method": ..., "values": {param: share}}


def _plain(x: Any) -> Any:
    """A JSON value of a table cell (numpy scalars as Python numbers, NaN as None)."""
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def search_outcome(sweep_dir: Path, state: dict) -> dict[str, Any]:
    """{study attribute: value} of a search sweep's outcome: ``confirmation.*`` (the winner, and its confirmation
    where there is one) and ``importance.*``; empty before a configuration has a score."""
    from analysis.data.collect import collect
    from analysis.report.search_report import objectives
    from analysis.stats.search import configurations, importance, study_distributions
    from analysis.stats.search_verdicts import (
        STUDY_ATTR,
        confirmation_note,
        confirmation_table,
        confirmed_score,
        verdict_words,
    )

    df = collect(sweep_dir)
    if not len(df):
        return {}
    objs = objectives(state)
    o = objs[0]
    configs = configurations(df, objs)
    ranked = configs.dropna(subset=["rank"]).sort_values("rank", kind="stable")
    if not len(ranked):
        return {}
    params = configs.attrs.get("params", [])
    table = confirmation_table(df, configs, o)
    winner = str(table.iloc[0]["sample"]) if table is not None else str(ranked.iloc[0]["sample"])
    row = configs.set_index("sample").loc[winner]
    out: dict[str, Any] = {
        f"{STUDY_ATTR}.metric": o.metric,
        f"{STUDY_ATTR}.sample": winner,
        f"{STUDY_ATTR}.values": {p: _plain(row[p]) for p in params},
        f"{STUDY_ATTR}.search_score": _plain(row[o.metric]),
    }
    if table is None:
        out[f"{STUDY_ATTR}.verdict"] = "not confirmed: the spec has no search.confirm (or no confirmation finished)"
    else:
        confirmed, (lo, hi) = confirmed_score(table)
        out.update({
            f"{STUDY_ATTR}.confirmed_value": _plain(confirmed),
            f"{STUDY_ATTR}.confirmed_interval": [_plain(lo), _plain(hi)],
            f"{STUDY_ATTR}.seeds": [int(s) for s in table.iloc[0]["seeds"]],
            f"{STUDY_ATTR}.verdict": verdict_words(table),
        })  # fmt: skip
        note = confirmation_note(table, o)
        if note:
            out[f"{STUDY_ATTR}.note"] = note
    dists = study_distributions(Path(sweep_dir) / "optuna.db", str(state.get("name")))
    imp = importance(configs, o, dists, resamples=0)
    for name, sub in imp.groupby("evaluator", sort=False):
        values = {str(p): _plain(v) for p, v in zip(sub["param"], sub["importance"])}
        out[f"{IMPORTANCE_ATTR}.{name}"] = {"method": str(sub["method"].iloc[0]), "values": values}
    return out


def parent_tags(outcome: dict[str, Any]) -> dict[str, str]:
    """The MLflow parent run's tags of a search's outcome (``search.winner``, ``search.winner_values``,
    ``search.search_score``, ``search.confirmed_value``, ``search.verdict``, ...)."""
    from analysis.stats.search_verdicts import STUDY_ATTR

    names = {"sample": "winner", "values": "winner_values", "seeds": "confirmed_seeds"}
    tags = {}
    for key, value in outcome.items():
        if not key.startswith(STUDY_ATTR + "."):
            continue
        short = key[len(STUDY_ATTR) + 1 :]
        if isinstance(value, dict):
            text = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            text = json.dumps(value)
        else:
            text = str(value)
        tags[f"search.{names.get(short, short)}"] = text
    return tags


def record_search(sweep_dir: Path, state: dict, tracking: Optional[dict], echo: Callable[[str], None] = print) -> dict:
    """Write a search sweep's outcome (search_outcome) into its study's user attributes and its MLflow parent run's
    tags; returns it.  A store that cannot take it is logged in one line: the sweep's own files stand."""
    from sweeps.state.search_state import storage_url

    outcome = search_outcome(Path(sweep_dir), state)
    if not outcome:
        return outcome
    try:
        import optuna

        study = optuna.load_study(study_name=str(state.get("name")), storage=storage_url(Path(sweep_dir)))
        for key, value in outcome.items():
            study.set_user_attr(key, value)
    except Exception as exc:  # noqa: BLE001 - the report has it all; the study is a copy of it
        log.info("search outcome not written into the Optuna study: %s", exc)
    if tracking and tracking.get("uri") and tracking.get("parent_run_id"):
        from .tracking import describe_parent

        try:
            describe_parent(tracking["uri"], tracking["parent_run_id"], {}, parent_tags(outcome))
        except Exception as exc:  # noqa: BLE001
            log.info("search outcome not written to the MLflow parent run: %s", exc)
    from sweeps.state.live import knob_text

    verdict = outcome.get("confirmation.verdict", "")
    echo(f"search winner {outcome['confirmation.sample']} ({knob_text(outcome['confirmation.values'])}): {verdict}")
    return outcome
