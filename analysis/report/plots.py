"""The report's figures as PNG bytes (base64), drawn with matplotlib's Agg backend."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd

from analysis.data.metrics import for_task, get_reading, sweep_task
from analysis.stats.comparisons import improvement, seed_values
from analysis.stats.seed_noise import pooled_noise, standard_error
from analysis.stats.trajectory import eval_records
from transformer_core.rundir import Status


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    # text from specs (group names, titles) drawn as written: a '$' pair is not matplotlib's mathtext
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def row_curves(df: pd.DataFrame, key: str = "dev_ce") -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """{row: (steps, mean, (lo, hi) over seeds)} of one eval key across the row's finished seeds."""
    fin = df[df["status"] == Status.FINISHED]
    out = {}
    for row, sub in fin.groupby("row", sort=False):
        per_step: dict[int, list[float]] = {}
        for wd in sub["workdir"]:
            for e in eval_records(wd):
                v = e.get(key)
                if v is None and key == "dev_ce" and e.get("dev_ppl"):
                    v = float(np.log(e["dev_ppl"]))
                if v is not None:
                    per_step.setdefault(int(e["step"]), []).append(float(v))
        if per_step:
            steps = np.array(sorted(per_step))
            vals = [np.array(per_step[s]) for s in steps]
            out[row] = (steps, np.array([v.mean() for v in vals]), np.array([[v.min(), v.max()] for v in vals]))
    return out


def panel_groups(t: pd.DataFrame) -> list[str]:
    """The groups that get a learning-curve panel: every Table 3 group of the sweep (base is drawn in each)."""
    return [g for g in dict.fromkeys(t["group"]) if g != "base"] or ["base"]


def curve_panels(df: pd.DataFrame, t: pd.DataFrame) -> str | None:
    """Small multiples: one panel per Table 3 group, base in every panel, a band over seeds where there are seeds."""
    curves = row_curves(df)
    if not curves:
        return None
    plt = _pyplot()
    groups = panel_groups(t)
    ncol = min(3, len(groups))
    nrow = -(-len(groups) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.0 * nrow), squeeze=False, sharey=True)
    for ax, group in zip(axes.flat, groups):
        rows = ["base"] + [r for r, g in zip(t["row"], t["group"]) if g == group and r != "base"]
        for i, row in enumerate(r for r in rows if r in curves):
            steps, mean, band = curves[row]
            color = "black" if row == "base" else f"C{i % 10}"
            ax.plot(steps, mean, color=color, lw=1.6 if row == "base" else 1.2, label=row)
            if (band[:, 1] > band[:, 0]).any():
                ax.fill_between(steps, band[:, 0], band[:, 1], color=color, alpha=0.15, lw=0)
        ax.set_title(f"group {group}", fontsize=10, gid=f"panel-{group}")
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper right")
    for ax in axes[:, 0]:
        ax.set_ylabel("dev cross-entropy (nats)", fontsize=8)
    for ax in list(axes.flat)[len(groups) :]:
        ax.axis("off")
    fig.suptitle("learning curves per group (band: min-max over seeds)", fontsize=10)
    return _png(fig)


def bleu_vs_params(t: pd.DataFrame) -> str | None:
    """dev BLEU against parameters, ours and (where a row shows the paper's numbers) the paper's; None where the
    finished rows are all of one size (the plot would say nothing that the table does not)."""
    ok = t[t["n"] > 0]
    if ok["params_M"].nunique() < 2:
        return None
    plt = _pyplot()
    pp = t.dropna(subset=["paper_params_M"]) if "paper_params_M" in t else t.iloc[:0]
    if not len(pp):  # a study with no paper rows: our panel alone
        fig, a1 = plt.subplots(1, 1, figsize=(5, 3.6))
        _ours(a1, ok)
        return _png(fig)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    _ours(a1, ok)
    a2.scatter(pp["paper_params_M"], pp["paper_bleu_dev"], color="tab:orange")
    for _, r in pp.iterrows():
        a2.annotate(r["row"], (r["paper_params_M"], r["paper_bleu_dev"]), fontsize=7)
    a2.set(xlabel="parameters (M), paper", ylabel="dev BLEU, paper", title="paper (newstest2013)")
    return _png(fig)


def _ours(a1, ok: pd.DataFrame) -> None:
    """Our rows' dev BLEU (95% interval) against their parameters."""
    a1.errorbar(ok["params_M"], ok["bleu_dev"], yerr=ok["bleu_dev_ci"].fillna(0).astype(float), fmt="o", capsize=3)
    for _, r in ok.iterrows():
        a1.annotate(r["row"], (r["params_M"], r["bleu_dev"]), fontsize=7)
    a1.set(xlabel="parameters (M), ours", ylabel="dev BLEU, ours (95% CI)", title="ours (at the profile's scale)")


FOREST = "differences from base"  # the report draws it first, before the tables
PAPER_DELTA = {"dev_bleu": "paper_delta_bleu", "dev_ce": "paper_delta_ce"}


def forest(df: pd.DataFrame, t: pd.DataFrame, readings: tuple[str, ...], noise: dict | None = None) -> str | None:
    """One panel per reading: each row's difference from base (mean, 95% interval from the seed-noise model), its
    seeds as dots (seed value minus base's mean), the paper's difference as a marker and, right of the panel,
    P(row better than base) (verdicts.improvement, the claims' p_better).  ``noise`` is
    {reading: pooled_noise} of the sweep where the caller has it already."""
    rows = [r for r in t["row"] if r != "base"]
    panels = []
    for reading in readings:
        values = seed_values(df, reading)
        base = values.get("base", np.array([]))
        if len(base) and any(len(values.get(r, ())) for r in rows):
            panels.append((reading, values, base))
    if not panels:
        return None
    from scipy import stats

    plt = _pyplot()
    # constrained layout: the figure's title, the panels' titles and the row labels never overlap, however few rows
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 0.28 * len(rows) + 1.8), squeeze=False,
                             sharey=True, layout="constrained")  # fmt: skip
    paper, marked = t.set_index("row"), False
    for ax, (reading, values, base) in zip(axes[0], panels):
        pooled = noise[reading] if noise and reading in noise else pooled_noise(values)
        for y, row in enumerate(rows):
            v = values.get(row, np.array([]))
            if not len(v):
                continue
            d = float(v.mean() - base.mean())
            ax.scatter(v - base.mean(), [y] * len(v), s=9, color="0.55", zorder=2)
            if pooled.df:
                se, dof = standard_error(pooled, row, len(v), "base", len(base))
                half = stats.t.ppf(0.975, dof) * se
                ax.errorbar(d, y, xerr=half, fmt="o", color="C0", ms=4, capsize=2, zorder=3)
            else:
                ax.plot(d, y, "o", color="C0", ms=4, zorder=3)
            ax.text(1.01, y, f"{improvement(v, base, reading):.2f}", transform=ax.get_yaxis_transform(), ha="left",
                    va="center", fontsize=6, color="0.35", clip_on=False)  # fmt: skip
            col = PAPER_DELTA.get(reading)
            pv = paper.loc[row, col] if col and col in paper and row in paper.index else None
            if pv is not None and pv == pv:
                ax.plot(float(pv), y, "D", color="tab:orange", ms=4, zorder=4)
                marked = True
        ax.text(1.01, -0.9, "P", transform=ax.get_yaxis_transform(), ha="left", va="center", fontsize=6,
                color="0.35", clip_on=False)  # fmt: skip
        ax.axvline(0, color="black", lw=0.8)
        better = "right" if get_reading(reading).higher_is_better else "left"
        ax.set_title(f"{get_reading(reading).label}: row - base ({better} is better)", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0][0].set_yticks(range(len(rows)), rows)
    axes[0][0].invert_yaxis()
    paper_said = ", the paper (orange)" if marked else ""  # only where a row shows the paper's difference
    fig.suptitle(f"differences from base: mean and 95% interval (blue), seeds (grey){paper_said}; "
                 "P(row better than base) at the right", fontsize=9)  # fmt: skip
    return _png(fig)


def figures(t: pd.DataFrame, df: pd.DataFrame, noise: dict | None = None) -> dict[str, str]:
    """The report's figures by title (PNG, base64), the forest plot first; ``noise`` as for ``forest``."""
    task = for_task(sweep_task(df))
    out = {FOREST: forest(df, t, task.versus, noise)}  # the readings rows are judged on against base
    out["learning curves"] = curve_panels(df, t)
    if "dev_bleu" in task.readings:  # a language-model sweep (task lm) has no BLEU
        out["BLEU against parameters"] = bleu_vs_params(t)
    return {k: v for k, v in out.items() if v}
