"""The search report's interactive plots: Optuna's own (optuna.visualization, drawn by plotly) over the sweep's study,
for the reader who explores (hover a point for its trial, brush an axis of the parallel coordinates, zoom a slice).

History, parallel coordinates, slices and parameter importance for one objective; the Pareto front for two.  The
study is read from a private copy of optuna.db (analysis/data/study_file.py), so a report writes nothing into it.  The
page loads plotly.min.js from beside report.html, copied from the installed plotly package: it works offline and
fetches nothing.  report.md keeps its static images (search_plots.py).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)
SCRIPT = "plotly.min.js"


def interactive_plots(optuna_db: Path, study_name: str) -> list[tuple[str, str]]:
    """[(title, an HTML div drawing the figure)] of the study in ``optuna_db``; empty where there is no study with a
    finished trial, or plotly is not installed (one log line says which)."""
    try:
        import optuna.visualization as vis
        from plotly.io import to_html
    except ImportError as exc:
        log.info("no interactive plots: %s", exc)
        return []
    from analysis.data.study_file import StudyFileError, read_study

    if not Path(optuna_db).exists():
        return []
    try:
        with read_study(Path(optuna_db), study_name, missing_ok=True) as study:
            return _figures(study, vis, to_html) if study is not None else []
    except StudyFileError as exc:
        log.info("no interactive plots: %s", exc)
        return []


def _figures(study, vis, to_html) -> list[tuple[str, str]]:
    import optuna

    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        return []
    names = study.metric_names or [f"objective {i}" for i in range(len(study.directions))]
    figures = []
    if len(study.directions) > 1:
        figures.append(
            (f"Pareto front ({names[0]} against {names[1]})", vis.plot_pareto_front(study, target_names=names))
        )
    else:
        name = names[0]
        figures.append((f"Optimization history ({name})", vis.plot_optimization_history(study, target_name=name)))
        if done[0].params:
            figures.append((f"Parallel coordinates ({name})", vis.plot_parallel_coordinate(study, target_name=name)))
            figures.append((f"Slices ({name} against each parameter)", vis.plot_slice(study, target_name=name)))
        if len(done) >= 3 and len(done[0].params) > 1:  # importance needs variation over several parameters
            try:
                from optuna.importance import PedAnovaImportanceEvaluator

                # optuna-dashboard's evaluator and data (analysis.stats.search.dashboard_importance), named in the title
                title = f"Parameter importance ({name}; PED-ANOVA, target quantile 0.1, as optuna-dashboard)"
                fig = vis.plot_param_importances(study, evaluator=PedAnovaImportanceEvaluator(), target_name=name)
                figures.append((title, fig))
            except (ValueError, RuntimeError) as exc:  # too few distinct configurations for the evaluator
                log.info("no importance plot: %s", exc)
    return [(title, to_html(fig, full_html=False, include_plotlyjs=False, default_width="100%"))
            for title, fig in figures]  # fmt: skip


def ship_script(out: Path) -> Optional[Path]:
    """plotly.min.js copied beside report.html (None where plotly is not installed)."""
    try:
        import plotly
    except ImportError:
        return None
    src = Path(plotly.__file__).parent / "package_data" / SCRIPT
    if not src.is_file():
        return None
    dst = Path(out) / SCRIPT
    shutil.copyfile(src, dst)
    return dst
