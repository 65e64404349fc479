"""The search report's figures as PNG bytes (matplotlib, Agg): best so far, expected best of n, parallel
coordinates, one slice per parameter, the Pareto front of two objectives.  Static images: no network."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd

from analysis.stats.search import Objective

from .plots import _pyplot


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _label(o: Objective) -> str:
    return f"{o.metric} ({'higher' if o.mode == 'max' else 'lower'} is better)"


def progress(curve: pd.DataFrame, evp: pd.DataFrame, objective: Objective) -> bytes:
    """Best so far against samples (with the expected best of n random samples and its sd) and against
    cumulative device-seconds and training FLOPs."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), layout="constrained")
    a = axes[0]
    a.plot(curve["samples"], curve["score"], "o", color="0.6", ms=4, label="each sample (seed mean)")
    a.step(curve["samples"], curve["best"], where="post", color="C0", label="best so far")
    if len(evp):
        a.plot(evp["n"], evp["expected_best"], color="C1", label="expected best of n random samples")
        a.fill_between(evp["n"], evp["expected_best"] - evp["sd"], evp["expected_best"] + evp["sd"], color="C1",
                       alpha=0.2, lw=0)  # fmt: skip
    a.set(xlabel="samples (in the order they started)", ylabel=_label(objective))
    a.legend(fontsize=7)
    for ax, col, label in ((axes[1], "device_seconds", "device-seconds (cumulative)"),
                           (axes[2], "train_flops", "training FLOPs (cumulative)")):  # fmt: skip
        ax.step(curve[col], curve["best"], where="post", color="C0")
        ax.plot(curve[col], curve["score"], "o", color="0.6", ms=4)
        ax.set(xlabel=label, ylabel=f"best {objective.metric} so far")
    fig.suptitle("best so far against samples and against compute", fontsize=10)
    return _png(fig)


def _axis_values(values: pd.Series, dist) -> tuple[np.ndarray, list, list]:
    """Values of one parameter on a [0, 1] axis, with tick positions and labels (categories evenly spaced,
    a log range on a log scale)."""
    from optuna.distributions import CategoricalDistribution

    if dist is None or isinstance(dist, CategoricalDistribution) or values.map(lambda v: isinstance(v, str)).any():
        cats = list(dist.choices) if isinstance(dist, CategoricalDistribution) else sorted(set(values), key=str)
        pos = {c: (i / (len(cats) - 1) if len(cats) > 1 else 0.5) for i, c in enumerate(cats)}
        return np.array([pos.get(v, np.nan) for v in values]), list(pos.values()), [str(c) for c in cats]
    lo, hi = float(dist.low), float(dist.high)
    f = (lambda x: np.log(x)) if getattr(dist, "log", False) else (lambda x: np.asarray(x, dtype=float))
    span = (f(hi) - f(lo)) or 1.0
    ticks = [lo, hi]
    return (f(values.astype(float).to_numpy()) - f(lo)) / span, [0.0, 1.0], [f"{t:.3g}" for t in ticks]


def parallel_coordinates(configs: pd.DataFrame, params: list[str], dists: dict, objective: Objective) -> bytes:
    """One line per configuration through every parameter and the objective, coloured by the objective."""
    plt = _pyplot()
    scored = configs.dropna(subset=[objective.metric])
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * (len(params) + 1)), 4))
    y = scored[objective.metric].astype(float)
    lo, hi = y.min(), y.max()
    norm = ((y - lo) / (hi - lo)).to_numpy() if hi > lo else np.full(len(y), 0.5)
    columns = [_axis_values(scored[p], dists.get(p)) for p in params]
    cmap = plt.get_cmap("viridis")
    shade = norm if objective.mode == "max" else 1 - norm
    order = np.argsort(shade)  # the best drawn last, on top
    for i in order:
        xs = list(range(len(params) + 1))
        ys = [c[0][i] for c in columns] + [norm[i]]
        ax.plot(xs, ys, color=cmap(shade[i]), lw=2.2 if shade[i] == shade.max() else 1.2, alpha=0.85)
    for k, (_, ticks, labels) in enumerate(columns + [(None, [0.0, 1.0], [f"{lo:.3g}", f"{hi:.3g}"])]):
        ax.axvline(k, color="0.3", lw=0.8)
        for t, lab in zip(ticks, labels):
            ax.annotate(lab, (k, t), xytext=(3, 0), textcoords="offset points", fontsize=7, va="center")
    ax.set_xticks(range(len(params) + 1), params + [objective.metric], fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(params) + 0.4)
    ax.set_title("parallel coordinates: one line per configuration (colour: the objective, the best yellow)",
                 fontsize=9)  # fmt: skip
    return _png(fig)


def _number(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def slices(trials: pd.DataFrame, configs: pd.DataFrame, params: list[str], dists: dict, objective: Objective) -> bytes:
    """One panel per parameter: every finished seed (small grey dots) and each configuration's mean (coloured by
    the order it was sampled) against the parameter's value."""
    from optuna.distributions import CategoricalDistribution

    plt = _pyplot()
    ncol = min(3, len(params))
    nrow = -(-len(params) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.4 * ncol, 3.3 * nrow), squeeze=False, sharey=True,
                             layout="constrained")  # fmt: skip
    seeds = trials.dropna(subset=[objective.metric])
    order = np.arange(1, len(configs) + 1)
    for ax, p in zip(axes.flat, params):
        dist = dists.get(p)
        cat = dist is None and configs[p].map(lambda v: isinstance(v, str)).any()
        if isinstance(dist, CategoricalDistribution) or cat:
            cats = list(dist.choices) if dist is not None else sorted(set(configs[p]), key=str)
            where = {c: i for i, c in enumerate(cats)}
            xs_seed = [where.get(s.get(p), math.nan) for s in seeds["sampled"]]
            xs = [where.get(v, math.nan) for v in configs[p]]
            ax.set_xticks(range(len(cats)), [str(c) for c in cats])
            ax.set_xlim(-0.5, len(cats) - 0.5)
        else:
            xs_seed = [_number(s.get(p)) for s in seeds["sampled"]]  # a value off the space's kind: not plotted
            xs = [_number(v) for v in configs[p]]
            if getattr(dist, "log", False):
                from matplotlib.ticker import FormatStrFormatter

                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(FormatStrFormatter("%.3g"))
                ax.xaxis.set_minor_formatter(FormatStrFormatter("%.2g"))
        ax.scatter(xs_seed, seeds[objective.metric], s=10, color="0.6", label="a seed")
        sc = ax.scatter(xs, configs[objective.metric], s=36, c=order, cmap="plasma", edgecolors="k", lw=0.4,
                        label="configuration mean")  # fmt: skip
        ax.set_title(p, fontsize=10)
        ax.tick_params(labelsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel(_label(objective), fontsize=8)
    for ax in list(axes.flat)[len(params) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.colorbar(sc, ax=axes, shrink=0.8, label="sample order")
    fig.suptitle("slices: the objective against each parameter", fontsize=10)
    return _png(fig)


def pareto(configs: pd.DataFrame, front: list[str], objectives: list[Objective]) -> bytes:
    """Two objectives: every configuration, the Pareto front's joined and labelled."""
    plt = _pyplot()
    a, b = objectives[:2]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.scatter(configs[a.metric], configs[b.metric], color="0.6", s=18, label="configuration")
    on = configs[configs["sample"].isin(front)].sort_values(a.metric)
    ax.plot(on[a.metric], on[b.metric], "o-", color="C3", label="Pareto front")
    for _, r in on.iterrows():
        ax.annotate(r["sample"], (r[a.metric], r[b.metric]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel=_label(a), ylabel=_label(b), title="Pareto front of the two objectives")
    ax.legend(fontsize=7)
    return _png(fig)
