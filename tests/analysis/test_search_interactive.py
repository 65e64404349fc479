"""The search report's interactive plots from a real Optuna study (analysis/report/search_interactive.py)."""

import optuna

from analysis.report.document import Heading
from analysis.report.search_interactive import SCRIPT, interactive_plots, ship_script
from analysis.report.search_report import render_html


def _study(path, name, directions):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{path}", directions=directions,
                                sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
    study.set_metric_names(["dev_ppl", "params"][: len(directions)])

    def objective(t):
        lr, warmup = t.suggest_float("lr_scale", 0.1, 2.0, log=True), t.suggest_categorical("warmup", [5, 10])
        value = (lr - 1.0) ** 2 + warmup / 10
        return value if len(directions) == 1 else (value, 1000 * lr)

    study.optimize(objective, n_trials=6)
    return path


def test_one_objective_gets_history_parallel_coordinates_slices_and_importance(tmp_path):
    db = _study(tmp_path / "optuna.db", "s", ["minimize"])
    before = db.read_bytes()
    live = interactive_plots(db, "s")
    assert [t.split(" (")[0] for t, _ in live] == [
        "Optimization history", "Parallel coordinates", "Slices", "Parameter importance"
    ]  # fmt: skip
    assert all("Plotly.newPlot" in div and "dev_ppl" in div for _, div in live)
    assert db.read_bytes() == before  # read from a private copy
    assert ship_script(tmp_path).name == SCRIPT and (tmp_path / SCRIPT).stat().st_size > 1e6
    page = render_html([Heading(1, "Search report: s")], {}, "s", live)
    assert f'<script src="{SCRIPT}"></script>' in page and page.count("Plotly.newPlot") == 4


def test_two_objectives_get_the_pareto_front_and_no_study_gets_nothing(tmp_path):
    live = interactive_plots(_study(tmp_path / "two.db", "t", ["minimize", "minimize"]), "t")
    assert [t for t, _ in live] == ["Pareto front (dev_ppl against params)"]
    assert interactive_plots(tmp_path / "missing.db", "t") == []
    assert "<script" not in render_html([Heading(1, "x")], {}, "x")  # no study: the page loads no script
