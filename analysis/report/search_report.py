"""The report of a search sweep: report.md (with its PNGs beside it) and a self-contained report.html, plus
trials.csv, configurations.csv, expected-best.csv and importance.csv, drawn from one model (``build_search``); the
two reports draw the same blocks (``search_blocks``, analysis.report.document), one as Markdown, one as HTML.

Each sampled configuration is its own row (its seeds replicate it alone); the report shows every trial,
each configuration's mean and seed sd, the best so far against samples and compute, the expected best of
n random samples (would more samples help?), parameter importance by two of Optuna's evaluators with
their bootstrap spread, parallel coordinates and a slice per parameter.  Reads a local sweep only.
"""

from __future__ import annotations

import html
import platform
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.data.collect import collect, precisions
from analysis.data.files import check_replaceable, read_json, read_once, whole_folder
from analysis.data.sweep_record import require_record
from analysis.data.text import to_csv, without_controls
from analysis.stats.search import (
    Objective,
    best_so_far,
    configurations,
    dashboard_importance,
    expected_best,
    importance,
    search_trials,
    study_distributions,
)
from analysis.stats.search_verdicts import confirmation_lines, confirmation_table, pareto_front
from transformer_core.formatting import MISSING, is_missing, number
from transformer_core.rundir import Status

from . import search_plots as plots
from .document import Block, Figure, Heading, Paragraph, Table, html_page, markdown_lines, write_markdown_file
from .search_interactive import SCRIPT, interactive_plots, ship_script

EVP_NOTE = (
    "Expected best of n: the expected maximum (for a minimised objective, minimum) of n samples drawn at "
    "random from the observed configurations' scores, E[max of n] = sum_i v_(i) [(i/N)^n - ((i-1)/N)^n] over the "
    "sorted scores v_(1) <= ... <= v_(N) (Dodge et al. 2019, expected validation performance), with its sd. It "
    "treats the samples as independent draws from the search space: exact for random sampling and for Optuna's "
    "TPE sampler during its first 10 (random) trials, a rough guide after. A curve still rising at n = N says "
    "more samples would likely find better; a flat one says the space is exhausted at this budget."
)
IMPORTANCE_NOTE = (
    "Importance: Optuna's FanovaImportanceEvaluator (fANOVA: the share of the objective's variance a random "
    "forest attributes to each parameter) and PedAnovaImportanceEvaluator (PED-ANOVA: how differently the best "
    "configurations' values of each parameter are distributed from all of them), each normalised to sum to 1, "
    "computed on the configuration means; median and 10-90% range over bootstrap resamples of the configurations. "
    "With few samples the range is wide: read it before the point value. Each evaluator's method column names its "
    "Optuna class and arguments; the fANOVA and PED-ANOVA point values are stored in the study as its user attributes "
    "importance.fANOVA and importance.PED-ANOVA (with the method), written when the sweep ended. The optuna-dashboard "
    "rows are what optuna-dashboard shows as Hyperparameter Importance: PED-ANOVA at Optuna's default target "
    "quantile 0.1 over the study's completed trials (with few trials its best tenth is one or two trials, and a warm "
    "start's trials count), so they differ from the rows above by method and data, not by error."
)


def is_search_sweep(sweep_dir: str | Path, df: pd.DataFrame | None = None) -> bool:
    """A sweep whose trials a searcher sampled (or one with a search study and nothing run yet)."""
    if df is not None and "sample" in df and df["sample"].notna().any():
        return True
    if (Path(sweep_dir) / "optuna.db").exists():
        return True
    for path in (Path(sweep_dir) / "trials").glob("*/trial.json"):
        try:
            return bool(read_json(path).get("search"))
        except (OSError, ValueError, AttributeError):
            continue
    return False


def objectives(state: dict) -> list[Objective]:
    """The search's objectives from sweep.json: ``objectives`` [{metric, mode}, ...] or its metric and mode."""
    many = state.get("objectives")
    if many:
        return [Objective(o["metric"], o["mode"]) for o in many]
    return [Objective(state.get("metric", "dev_bleu"), state.get("mode", "max"))]


def _num(x, digits=3) -> str:
    if is_missing(x):
        return MISSING
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) >= 1e4 or (x and abs(x) < 1e-3) else f"{x:.{digits}f}"
    return str(x)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.2f} hours" if seconds >= 3600 else f"{seconds:.0f} seconds"


def _value(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def configs_display(configs: pd.DataFrame, objs: list[Objective]) -> pd.DataFrame:
    out = configs.sort_values("rank", na_position="last", kind="stable")
    d = {"rank": out["rank"].astype(str).replace("<NA>", "-"), "sample": out["sample"]}
    d.update({p: out[p].map(_value) for p in configs.attrs.get("params", [])})
    for o in objs:
        d[f"{o.metric} (mean)"] = out[o.metric].map(_num)
        d[f"{o.metric} seed sd"] = out[f"{o.metric}_sd"].map(_num)
    d["seeds"] = [f"{a}/{b}" for a, b in zip(out["seeds_finished"], out["seeds"])]
    d["device-s"] = out["cost_seconds"].map(lambda x: f"{x:.1f}")
    d["FLOPs"] = out["cost_flops"].map(lambda x: f"{x:.2e}")
    d["state"] = out["state"]
    return pd.DataFrame(d)


def trials_display(trials: pd.DataFrame, params: list[str], objs: list[Objective]) -> pd.DataFrame:
    d = {"trial": trials["trial_id"], "sample": trials["sample"], "seed": trials["seed"]}
    d.update({p: [_value(s.get(p)) for s in trials["sampled"]] for p in params})
    for m in dict.fromkeys([o.metric for o in objs] + ["dev_ppl"]):
        if m in trials:
            d[m] = trials[m].map(_num)
    d["device-s"] = trials["wall_seconds"].map(lambda x: _num(x, 1))
    d["FLOPs"] = trials["train_flops"].map(lambda x: number(x, ".2e"))
    d["state"] = trials["status"]
    d["step"] = trials["step"]
    return pd.DataFrame(d)


def importance_display(imp: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "evaluator": imp["evaluator"], "parameter": imp["param"], "importance (all)": imp["importance"].map(_num),
        "bootstrap median": imp["median"].map(_num),
        "10-90% range": [f"{_num(a)} - {_num(b)}" for a, b in zip(imp["lo"], imp["hi"])],
        "resamples": imp["resamples"], "note": imp["note"], "method": imp["method"],
    })  # fmt: skip


def search_title(state: dict) -> str:
    """The search report's heading: the spec's title (sweep.json's report record) with the sweep's name, or
    "Search report: NAME" where the spec gives none."""
    rec: dict = state["report"] if isinstance(state.get("report"), dict) else {}
    title = rec.get("title") if isinstance(rec.get("title"), str) else ""
    return f"{title}: {state.get('name')}" if title else f"Search report: {state.get('name')}"


def _described(state: dict) -> list[Block]:
    """The spec's description under the heading, where it gives one."""
    rec: dict = state["report"] if isinstance(state.get("report"), dict) else {}
    text = rec.get("description") if isinstance(rec.get("description"), str) else ""
    return [Paragraph(text)] if text else []


def _facts(state: dict, df: pd.DataFrame, configs: pd.DataFrame, objs: list[Objective]) -> str:
    if not len(df):  # a search whose first trial has not written anything yet
        name, spec, profile = state.get("name"), state.get("spec"), state.get("profile")
        return f"Search **{name}** ({spec}), profile **{profile}**: no trial yet."
    fin = df[df["status"] == Status.FINISHED]
    first = fin.iloc[0] if len(fin) else None
    hw = f"{platform.machine()}, {first['device'] if first is not None else '?'} "
    hw += precisions(fin)
    goal = ", ".join(f"{o.metric} ({o.mode})" for o in objs)
    return (
        f"Search **{state.get('name')}** ({state.get('spec')}), profile **{state.get('profile')}**: "
        f"{len(configs)} sampled configurations, {len(fin)}/{len(df)} trials finished; objective {goal}; "
        f"{hw}, torch {first['torch_version'] if first is not None else '?'}; "
        f"{_duration(df['wall_seconds'].fillna(0).sum())} device time, "
        f"{df['train_flops'].fillna(0).sum():.2e} training FLOPs (6 x params x tokens)."
    )


def _best_line(configs: pd.DataFrame, o: Objective, params: list[str]) -> str:
    top = configs[configs["rank"] == 1]
    if not len(top):
        return "**Best**: no configuration has a finished seed yet."
    b = top.iloc[0]
    values = ", ".join(f"{p} = {_value(b[p])}" for p in params)
    sd = f", seed sd {_num(b[f'{o.metric}_sd'])}" if b["seeds_finished"] > 1 else " (one seed: no seed sd)"
    return (
        f"**Best configuration** by {o.metric}: {b['sample']} ({values}): {_num(b[o.metric])} over "
        f"{b['seeds_finished']} seed(s){sd}. The best of several noisy samples is optimistic: a confirmation "
        f"with fresh seeds says how much of it holds."
    )


def _evp_line(evp: pd.DataFrame, o: Objective) -> str:
    if len(evp) < 2:
        return "Expected best of n: needs two or more configurations with a score."
    last, before = evp.iloc[-1], evp.iloc[-2]
    gain = o.sign * (last["expected_best"] - before["expected_best"])
    return (
        f"Expected best of n random samples: n = 1: {_num(evp['expected_best'].iloc[0])}, n = {int(before['n'])}: "
        f"{_num(before['expected_best'])}, n = {int(last['n'])}: {_num(last['expected_best'])} ± {_num(last['sd'])} "
        f"(the last sample added {_num(gain)} in expectation{'' if gain > 0 else ': the curve is flat'})."
    )


@dataclass
class SearchReportModel:
    """Everything the report of a search sweep shows, computed once by ``build_search``; the writers draw it."""

    sweep_dir: Path
    state: dict  # sweep.json
    frame: pd.DataFrame  # analysis.data.collect: one line per trial
    objectives: list[Objective]  # the first is the one the search ranks by
    trials: pd.DataFrame  # the search's own trials (search.search_trials)
    configs: pd.DataFrame  # one line per sampled configuration (search.configurations), ranked
    params: list[str]  # the sampled parameters
    curve: pd.DataFrame | None = None  # best so far against samples and compute
    evp: pd.DataFrame | None = None  # expected best of n samples
    importance: pd.DataFrame | None = None  # per evaluator and parameter, with bootstrap spread
    front: list[str] = field(default_factory=list)  # the Pareto front's samples (two objectives)
    confirm: pd.DataFrame | None = None  # the confirmation round's table (search_verdicts), None without one
    figures: dict[str, bytes] = field(default_factory=dict)  # file name -> PNG
    sections: list[tuple[str, str]] = field(default_factory=list)  # (title, file name) of each figure, in order

    @property
    def objective(self) -> Objective:
        return self.objectives[0]


def build_search(sweep_dir: str | Path, resamples: int = 30) -> SearchReportModel:
    """Collect a search sweep and compute every table and figure its report shows."""
    sweep_dir = Path(sweep_dir)
    df = collect(sweep_dir)
    state = dict(require_record(sweep_dir).raw)  # read and checked once (analysis.data.sweep_record)
    objs = objectives(state)
    o = objs[0]
    trials = search_trials(df) if len(df) else df
    configs = configurations(df, objs) if len(df) else pd.DataFrame()
    params = configs.attrs.get("params", [])
    m = SearchReportModel(sweep_dir, state, df, objs, trials, configs, params)
    if not len(configs):
        return m
    db, name = sweep_dir / "optuna.db", str(state.get("name"))
    dists = study_distributions(db, name)
    m.curve, m.evp = best_so_far(configs, o), expected_best(configs, o)
    ours, dashboard = importance(configs, o, dists, resamples=resamples), dashboard_importance(db, name)
    m.importance = pd.concat([ours, dashboard], ignore_index=True) if len(dashboard) else ours
    m.front = pareto_front(configs, objs) if len(objs) > 1 else []
    m.confirm = confirmation_table(df, configs, o)
    m.sections = [("Best so far and expected best of n", "progress.png")]
    m.figures["progress.png"] = plots.progress(m.curve, m.evp, o)
    if len(params) and configs[o.metric].notna().sum() >= 2:
        m.figures["parallel-coordinates.png"] = plots.parallel_coordinates(configs, params, dists, o)
        m.figures["slices.png"] = plots.slices(trials, configs, params, dists, o)
        m.sections += [("Parallel coordinates", "parallel-coordinates.png"), ("Slices", "slices.png")]
    if m.front:
        m.figures["pareto.png"] = plots.pareto(configs, m.front, objs)
        m.sections.append(("Pareto front", "pareto.png"))
    return m


def write_search_report(sweep_dir: str | Path, out_dir: str | Path | None = None, resamples: int = 30) -> Path:
    """Write the report of a local search sweep into out_dir (default SWEEP_DIR/report) whole: into a temporary
    folder beside it, swapped in once every file is written (analysis.data.files.whole_folder)."""
    out = Path(out_dir) if out_dir else Path(sweep_dir) / "report"
    check_replaceable(out)  # a folder of other files: refused before the report is computed
    with read_once():  # each run's files read once, one state of a running sweep
        model = build_search(sweep_dir, resamples)
    blocks = search_blocks(model)
    live = interactive_plots(Path(sweep_dir) / "optuna.db", str(model.state.get("name")))
    with whole_folder(out) as tmp:
        write_search_csv(model, tmp)
        write_markdown_file(tmp, blocks, model.figures)
        if live and ship_script(tmp) is None:
            live = []  # no plotly.min.js to load: the static images only
        page = render_html(blocks, model.figures, str(model.state.get("name")), live)
        (tmp / "report.html").write_text(without_controls(page))
    return out


def write_search_csv(model: SearchReportModel, out: Path) -> None:
    """trials.csv, configurations.csv, expected-best.csv and importance.csv (none before a configuration starts)."""
    if not len(model.configs) or model.evp is None or model.importance is None:  # set together (build_search)
        return
    to_csv(trials_display(model.trials, model.params, model.objectives), out / "trials.csv")
    to_csv(model.configs.drop(columns=["started"]), out / "configurations.csv")
    to_csv(model.evp, out / "expected-best.csv")
    to_csv(model.importance, out / "importance.csv")


def search_blocks(model: SearchReportModel) -> list[Block]:
    """What the report says, in order: report.md and report.html are these blocks drawn (analysis.report.document)."""
    state, configs, objs, o, params = model.state, model.configs, model.objectives, model.objective, model.params
    out: list[Block] = [Heading(1, search_title(state)), *_described(state),
                        Paragraph(_facts(state, model.frame, configs, objs))]  # fmt: skip
    if not len(configs):
        return out + [Paragraph("No sampled configuration has started yet.")]
    out += [Paragraph(_best_line(configs, o, params)), Heading(2, "Configurations (one row per sample, best first)"),
            Paragraph("Each sampled configuration is a row: its seeds are replicates of it alone. Mean and seed sd "
                      "over its finished seeds; cost summed over its seeds (device-seconds of training and evaluation, "
                      "training FLOPs)."),
            Table(configs_display(configs, objs))]  # fmt: skip
    if model.front:
        out += [Heading(2, "Pareto front"), Paragraph(f"Configurations no other beats on both {objs[0].metric} and "
                                                      f"{objs[1].metric}: {', '.join(model.front)}.")]  # fmt: skip
    if model.confirm is not None:
        out += [Heading(2, "Confirmation with fresh seeds"), *map(Paragraph, confirmation_lines(model.confirm, o)),
                Table(model.confirm.attrs["display"])]  # fmt: skip
    imp, evp = model.importance, model.evp
    assert imp is not None and evp is not None  # set with the configurations (build_search)
    out += [Heading(2, "Would more samples help?"), Paragraph(_evp_line(evp, o)), Paragraph(EVP_NOTE),
            Heading(2, "Parameter importance"), Paragraph(IMPORTANCE_NOTE),
            Table(importance_display(imp)) if len(imp) else Paragraph(
                "Not computed: it needs three or more configurations with a score and a parameter that took two or "
                "more values."),
            Heading(2, "Plots"), *[b for t, name in model.sections for b in (Heading(3, t), Figure(t, name))],
            Heading(2, "Every trial"), Table(trials_display(model.trials, params, objs))]  # fmt: skip
    return out


def search_markdown(model: SearchReportModel) -> list[str]:
    """report.md's lines."""
    return markdown_lines(search_blocks(model))


def render_html(blocks: list[Block], figs: dict[str, bytes], title: str, live: list | None = None) -> str:
    """report.html: the report's blocks, images inline (base64), so the page works offline and alone; ``live``:
    [(title, div)] of interactive plots (search_interactive.py), drawn by the plotly.min.js beside the page."""
    if not live:
        return html_page(title, blocks, figs)
    # explore the study: Optuna's plots, interactive; the images above are what report.md shows
    after = [
        "<h2>Interactive plots (Optuna's, from the study)</h2>",
        *(f"<h3>{html.escape(t)}</h3>{div}" for t, div in live),
    ]
    return html_page(title, blocks, figs, f'<script src="{SCRIPT}"></script>', after)
