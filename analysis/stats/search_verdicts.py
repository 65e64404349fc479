"""What a search's winner is worth: the Pareto front of two objectives, and the confirmation of the best
configurations with fresh seeds judged by the verdict engine (analysis.stats.verdicts)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.data.metrics import reading_of_metric
from analysis.data.samples import CONFIRM_GROUP
from transformer_core.formatting import MISSING, is_missing, number

from .comparisons import Comparison, Outcome, compare, seed_values
from .family import decide
from .rule import Rule
from .search import Objective
from .seed_noise import pooled_noise


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


STUDY_ATTR = "confirmation"  # the prefix of the study's user attributes that hold the confirmation (search_record)


def confirmation_table(df: pd.DataFrame, configs: pd.DataFrame, objective: Objective) -> pd.DataFrame | None:
    """The configurations re-run with fresh seeds after the search (group confirm), or None when there are none:
    per configuration its search rank and score (the search's, optimistic: it was picked as a maximum), its
    confirmed mean and 95% interval from the confirmation's seed noise, and the optimism (search - confirmed).

    ``attrs["comparison"]``: the search's winner (chosen before any fresh seed ran) against the best of the other
    confirmed configurations (Bonferroni over them), decided by the verdict engine (compare, then decide)."""
    confirm = df[df["group"] == CONFIRM_GROUP]
    reading = reading_of_metric(objective.metric)  # perplexity: its log
    if not len(confirm) or reading is None:
        return None
    values = seed_values(confirm, reading)
    noise = pooled_noise(values)
    search = configs.set_index("sample")
    rows = []
    for sample, sub in confirm.groupby("sample", sort=False):
        v = values.get(sample, np.array([]))
        mean, half, n = noise.mean_ci(v, sample)
        seeds = sorted(int(x) for x in sub.loc[sub["status"] == "finished", "seed"]) if "status" in sub else []
        rows.append({"sample": sample, "search_rank": search["rank"].get(sample), "search_score":
                     search[objective.metric].get(sample), "search_seeds": search["seeds_finished"].get(sample),
                     "confirmed": mean, "ci": half, "fresh_seeds": n, "fresh_planned": len(sub),
                     "seeds": seeds})  # fmt: skip
    if not rows:
        return None
    table = pd.DataFrame(rows).sort_values("search_rank", kind="stable", na_position="last")
    if reading == "dev_ce":  # the verdict reads ln PPL; the table shows perplexity beside it
        table["confirmed_ppl"] = np.exp(table["confirmed"])
    search_score = table["search_score"].astype(float)  # NaN: a confirmed sample the search does not hold
    score = np.log(search_score) if reading == "dev_ce" else search_score
    table["optimism"] = objective.sign * (score - table["confirmed"])
    table.attrs.update(reading=reading, noise=noise, samples=len(configs))
    table.attrs["comparison"] = _winner_against_rest(table, values, noise, reading)
    table.attrs["display"] = _display(table, objective)
    return table


def _winner_against_rest(table: pd.DataFrame, values: dict, noise, reading: str) -> Comparison | None:
    ranked = [s for s in table["sample"] if len(values.get(s, ()))]
    if len(ranked) < 2:
        return None
    winner, rest = ranked[0], ranked[1:]
    c = compare(values, noise, winner, ">", "best:" + ",".join(rest), reading)
    decide([c], Rule())
    return c


def _display(table: pd.DataFrame, objective: Objective) -> pd.DataFrame:
    unit = " (ln PPL)" if table.attrs["reading"] == "dev_ce" else ""
    return pd.DataFrame({
        "sample": table["sample"], "search rank": table["search_rank"],
        f"search {objective.metric}": [number(x, ".3f") for x in table["search_score"]],
        f"confirmed{unit}": [MISSING if is_missing(m) else f"{m:.3f}" + ("" if is_missing(h) else f" ± {h:.3f}")
                             for m, h in zip(table["confirmed"], table["ci"])],
        "fresh seeds": [f"{a}/{b}" for a, b in zip(table["fresh_seeds"], table["fresh_planned"])],
        f"optimism{unit}": [number(x, "+.3f") for x in table["optimism"]],
    })  # fmt: skip


SAID = {Outcome.AGREES: "better than the best of the rest beyond seed noise",
        Outcome.CONTRADICTS: "worse than the best of the rest beyond seed noise: the search picked wrong",
        Outcome.WITHIN_NOISE: "not separable from the best of the rest at these seeds (within seed noise)",
        Outcome.NO_REPLICATES: "not judged: no seed replicates"}  # fmt: skip


def verdict_words(table: pd.DataFrame) -> str:
    """The confirmation's verdict in words ('WINNER is not separable from the best of the rest ...'), or why there
    is none."""
    c = table.attrs.get("comparison")
    if c is None:
        return "not judged against another configuration: fewer than two were confirmed"
    return f"{c.a} is {SAID.get(c.outcome, c.outcome.value)}"


def confirmed_score(table: pd.DataFrame) -> tuple[float, tuple[float, float]]:
    """The winner's confirmed mean and 95% interval in its objective's units (perplexity: the geometric mean, the
    interval's ends exponentiated), comparable with its search score and the study's best value."""
    first = table.iloc[0]
    mean, half = float(first["confirmed"]), float(first["ci"]) if pd.notna(first["ci"]) else float("nan")
    lo, hi = mean - half, mean + half
    if table.attrs["reading"] == "dev_ce":
        return float(np.exp(mean)), (float(np.exp(lo)), float(np.exp(hi)))
    return mean, (lo, hi)


def confirmation_note(table: pd.DataFrame, objective: Objective) -> str | None:
    """The sentence that says the winner's confirmed value differs from its search score, the study's best value
    (optuna-dashboard's Best Trial), and which one to quote; None where the two are equal."""
    first = table.iloc[0]
    score = float(first["search_score"]) if pd.notna(first["search_score"]) else float("nan")
    confirmed, (lo, hi) = confirmed_score(table)
    if not np.isfinite(score) or np.isclose(score, confirmed, rtol=1e-9, atol=0.0):
        return None
    inside = "within" if lo <= score <= hi else "outside"
    seeds = ", ".join(str(s) for s in first["seeds"]) or "none finished"
    return (
        f"The confirmed {objective.metric} of {first['sample']} is {confirmed:.3f} (fresh seeds {seeds}), not its "
        f"search score {score:.3f}, the study's best value that optuna-dashboard shows as its Best Trial: the "
        f"search score is {inside} the confirmed 95% interval and optimistic (the best of "
        f"{table.attrs['samples']} noisy samples); quote the confirmed value."
    )


def confirmation_lines(table: pd.DataFrame, objective: Objective) -> list[str]:
    """What the confirmation says, in words: the winner's confirmed mean beside its search score, and whether it
    beats the best of the other confirmed configurations beyond seed noise."""
    first = table.iloc[0]
    unit = " ln PPL" if table.attrs["reading"] == "dev_ce" else ""
    lines = [
        f"The search's best, {first['sample']}, scored {number(first['search_score'], '.3f')} in the search (the best"
        f" of {table.attrs['samples']} sampled configurations, so optimistic); with {first['fresh_seeds']} fresh seeds "
        + (f"it scores {np.exp(first['confirmed']):.3f} (geometric mean; ln PPL " if unit else "it scores ")
        + f"{first['confirmed']:.3f}"
        + (f" ± {first['ci']:.3f}" if pd.notna(first["ci"]) else "")
        + (")" if unit else "")
        + f" (optimism {number(first['optimism'], '+.3f')}{unit}: how much better the search's score was than the"
        " confirmed one).",
        f"Seed noise of the confirmation: {table.attrs['noise'].describe()}.",
    ]
    note = confirmation_note(table, objective)
    lines += [note] if note else []
    lines.append(f"The Optuna study holds this confirmation as its user attributes {STUDY_ATTR}.* (the winner, its "
                 "values, search score, confirmed value, interval, fresh seeds and verdict), written when the sweep "
                 "ended.")  # fmt: skip
    c = table.attrs.get("comparison")
    if c is None:
        lines.append("Not judged against another configuration: fewer than two were confirmed.")
        return lines
    lines.append(f"Verdict: {verdict_words(table)}. Evidence: {c.detail}; decided at α = {Rule().alpha}.")
    return lines
