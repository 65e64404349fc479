"""The report's model is built once and the writers only draw it: every format from one ReportModel."""

import dataclasses
import inspect

import pytest

import analysis.report.model
import analysis.report.plots
import analysis.report.tables
import analysis.stats.comparisons
import analysis.stats.verdicts
from analysis.report import html_report
from analysis.report.model import ReportModel, build
from analysis.report.writers import write_csv, write_latex, write_markdown, write_report
from tests.analysis.test_analysis import make_sweep

FILES = ("report.md", "report.html", "table.csv", "table.tex", "claims.csv", "seeds.csv", "evalsets.csv")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return make_sweep(tmp_path_factory.mktemp("model-sweep"))


@pytest.fixture(scope="module")
def model(sweep) -> ReportModel:
    return build(sweep, samples=20)


def _refuse(*args, **kwargs):
    raise AssertionError("computed again after the model was built")


def test_writers_draw_the_model_without_computing(sweep, model, tmp_path, monkeypatch):
    """With collection, judging, noise and correlations disabled, the writers give exactly write_report's files."""
    ref = write_report(sweep, tmp_path / "ref", samples=20)
    for module, name in [(analysis.report.model, "collect"), (analysis.report.model, "judge_report"),
                         (analysis.report.model, "shown_noise"), (analysis.report.model, "seed_correlation"),
                         (analysis.report.model, "regime"), (analysis.report.model, "figures"),
                         (analysis.stats.verdicts, "judge_table"), (analysis.stats.verdicts, "pooled_noise"),
                         (analysis.stats.verdicts, "table_noise")]:  # fmt: skip
        monkeypatch.setattr(module, name, _refuse)
    out = tmp_path / "drawn"
    out.mkdir()
    write_csv(model, out)
    write_latex(model, out)
    write_markdown(model, out)
    (out / "report.html").write_text(html_report.render(model))
    for name in FILES:
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_what_the_model_holds_is_what_every_format_shows(model, tmp_path):
    """A verdict changed in the model appears in report.md, report.html and claims.csv alike."""
    claims = model.claims.copy()
    claims.loc[claims["claim"] == "D-dropout-helps", "summary"] = "MARKED IN THE MODEL"
    changed = dataclasses.replace(model, claims=claims)
    write_markdown(changed, tmp_path)
    write_csv(changed, tmp_path)
    assert "MARKED IN THE MODEL" in (tmp_path / "report.md").read_text()
    assert "MARKED IN THE MODEL" in (tmp_path / "claims.csv").read_text()
    assert "MARKED IN THE MODEL" in html_report.render(changed)


def test_report_md_and_report_html_say_the_same_in_the_same_order(model, tmp_path):
    """Both files draw one list of blocks: the same headings in the same order, every claims table (dev's and each
    evaluation set's) with the same claim-readings and verdicts, every figure written beside report.md and inlined
    in the page."""
    import html
    import re

    write_markdown(model, tmp_path)
    md, page = (tmp_path / "report.md").read_text(), html_report.render(model)
    md_heads = [re.sub(r"^#+ ", "", x) for x in md.splitlines() if x.startswith("#")]
    page_heads = [html.unescape(x) for x in re.findall(r"<h\d>(.*?)</h\d>", page)]
    assert md_heads == page_heads and len(md_heads) > 5
    assert any("evaluation set" in x or "test" in x for x in md_heads)  # the sets' claims are in both
    pngs = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", md)
    assert pngs and all((tmp_path / name).is_file() for name in pngs)
    assert page.count("data:image/png;base64,") == len(pngs) == len(model.images)
    rows = [x for x in md.splitlines() if x.startswith("| ")]
    shown = {(s, v) for t in [model.claims, *model.set_claims.values()] for s, v in zip(t["symbol"], t["verdict"])}
    legend = {name for name, _, _ in analysis.report.model.legend(model.shape.paper_claims)}
    for symbol, verdict in shown - {("?", "not measured")}:
        mark = f"{symbol} {verdict}"
        in_md = sum(x.count(mark) for x in rows)
        assert in_md and page.count(f"{html.escape(mark)}</span>") - (verdict in legend) == in_md, mark


def test_the_seed_noise_is_computed_once_and_shared(sweep, monkeypatch):
    """The table and the forest plot take the model's noise: their own fallback is never called."""
    monkeypatch.setattr(analysis.report.tables, "shown_noise", _refuse)
    monkeypatch.setattr(analysis.report.plots, "pooled_noise", _refuse)
    m = build(sweep, samples=20)
    assert set(m.noise) == {"dev_bleu", "dev_ce", "test_bleu"} and list(m.header_noise) == list(m.noise)
    assert m.table.loc[m.table["row"] == "base", "bleu_dev_ci"].notna().all()


def test_render_takes_the_model_only():
    assert list(inspect.signature(html_report.render).parameters) == ["model"]


def test_the_header_says_how_the_steps_ran():
    import pandas as pd

    from analysis.report.model import _step

    ran = pd.DataFrame({"compile": ["off", "off"], "fused_adam": [True, True]})
    assert _step(ran) == " (step: compile off, fused Adam)"
    mixed = pd.DataFrame({"compile": ["off", "on"], "fused_adam": [False, True]})
    assert _step(mixed) == " (step: compile off/on, loop/fused Adam)"
    assert _step(pd.DataFrame({"compile": [None], "fused_adam": [None]})) == ""  # results that predate the keys
    masks = pd.DataFrame({"compile": ["off", "off"], "fused_adam": [True, True], "fast_dropout": [True, False]})
    assert _step(masks) == " (step: compile off, fused Adam, int32/torch dropout masks)"
    assert _step(masks.assign(fast_dropout=False)) == " (step: compile off, fused Adam)"  # the default goes unsaid
    assert _step(ran.assign(packing=["off", None])) == " (step: compile off, fused Adam)"  # padded: unsaid
    packed = _step(ran.assign(packing=["varlen", "off"]))
    assert packed.endswith("packed batches (varlen attention): another random stream than padded batches)")
    assert _step(ran.assign(residual_dtype=["bf16", None])).endswith(", residual stream in bf16 (1 of 2 trials))")
    assert _step(ran.assign(residual_dtype=["fp32", None])) == " (step: compile off, fused Adam)"  # the default


def test_the_header_says_when_trials_ran_at_different_precisions():
    import pandas as pd

    from analysis.data.collect import precisions

    assert precisions(pd.DataFrame({"precision": ["bf16", "bf16"]})) == "bf16"
    mixed = pd.DataFrame({"precision": ["bf16", "fp32", "bf16", None]})
    assert precisions(mixed) == "mixed precision: bf16 2 trials, fp32 1 trial"
    assert precisions(pd.DataFrame({"row": ["base"]})) == ""  # results that predate the key


def test_a_stop_record_older_than_the_table_is_flagged_and_the_claims_it_judges_are_not_listed(model):
    """A resume stopped by hand used to leave the first session's record (claims
    'not reached' that the table now judges): the header says the record is older and lists only what is open."""
    from analysis.report.model import UNJUDGED, budget_lines

    judged = set(model.claims.loc[~model.claims["verdict"].isin(UNJUDGED), "claim"])
    assert judged
    claim = sorted(judged)[0]
    record = {"min": 2, "max": 3, "looks": 2, "rounds": [], "stop": "budget",
              "stopped": "wall-clock budget (60 min) spent during the minimum seeds: 4 of 38 trials finished",
              "unreached": {claim: "1h10m", "X-open": "2h"}}  # fmt: skip

    def header(ad):
        lines = budget_lines({**model.header, "adaptive": ad}, model.header_noise, model.regime, model.pairing,
                             model.rule, judged)  # fmt: skip
        return "\n".join(lines)

    stale = header(record)
    assert "recorded by an earlier session" in stale
    assert f"{claim}: DEMO_BUDGET" not in stale and "X-open: DEMO_BUDGET=2h" in stale
    current = header({**record, "unreached": {"X-open": "2h"}})
    assert "earlier session" not in current and "X-open: DEMO_BUDGET=2h" in current


def test_the_report_decides_on_the_evidence_the_spec_chose(tmp_path):
    """A sweep whose spec said ``seeds: {min, max, evidence: e}`` (sweep.json's adaptive record) is reported on
    e-values unless told otherwise; one without it on p-values with every planned look charged."""
    import json
    import shutil

    from analysis.stats.rule import sweep_rule

    src = make_sweep(tmp_path / "src")
    for evidence, expect in ((None, ("p", 3)), ("e", ("e", 1))):
        sweep = tmp_path / f"sweep-{evidence}"
        shutil.copytree(src, sweep)
        state = json.loads((sweep / "sweep.json").read_text())
        ad = {"min": 2, "max": 4, "looks": 3, "rounds": [{"round": 1}], "stop": "max"}
        state["adaptive"] = {**ad, **({"evidence": evidence} if evidence else {})}
        (sweep / "sweep.json").write_text(json.dumps(state))
        m = build(sweep, samples=20)
        assert (m.rule.evidence, m.rule.looks) == expect
        assert ("e-BH" in m.rule.describe()) == (evidence == "e")
        other = "p" if evidence == "e" else "e"
        assert build(sweep, samples=20, evidence=other).rule.evidence == other  # tsweep report --evidence
        assert sweep_rule(state["adaptive"]) == sweep_rule(state["adaptive"], evidence=expect[0])


def test_each_comparisons_probability_of_improvement_is_a_column(model):
    """P(a better than b) (rliable's probability of improvement over seed pairs) is its own column: one number per
    comparison of a claim-reading (in the evidence's order) and one per row judged against base, equal to what the
    evidence prints."""
    import re

    judged = model.claims[model.claims["p_better"].astype(str).str.len() > 0]
    assert len(judged)
    for _, line in judged.iterrows():
        shown = [float(x) for x in re.findall(r"P\(\S+ better\) ([0-9.]+)", line["evidence"])]
        numbers = [float(x) for x in str(line["p_better"]).split("; ") if x]
        assert numbers == pytest.approx(shown, abs=0.006) and all(0 <= x <= 1 for x in numbers)
    if len(model.versus):
        for _, line in model.versus.iterrows():
            shown = re.findall(r"P\(\S+ better\) ([0-9.]+)", line["evidence"])
            assert not shown or line["p_better"] == pytest.approx(float(shown[0]), abs=0.006)


def test_the_forest_plot_prints_each_rows_probability_of_improvement(sweep, monkeypatch):
    """The forest plot's panels carry P(row better than base) right of them, the same number as the
    claims' p_better (comparisons.improvement), one a row with seeds, on both readings."""
    from analysis.data.collect import collect
    from analysis.report.tables import reproduction_table

    figs = []
    monkeypatch.setattr(analysis.report.plots, "_png", lambda fig: figs.append(fig) or "png")
    df = collect(sweep)
    t = reproduction_table(df, samples=20)
    assert analysis.report.plots.forest(df, t, ("dev_bleu", "dev_ce")) == "png"
    (fig,) = figs
    axes = fig.axes
    assert len(axes) == 2 and "P(row better than base)" in fig._suptitle.get_text()
    for ax, reading in zip(axes, ("dev_bleu", "dev_ce")):
        values = analysis.stats.comparisons.seed_values(df, reading)
        want = [f"{analysis.stats.comparisons.improvement(v, values['base'], reading):.2f}"
                for r, v in values.items() if r != "base" and len(v)]  # fmt: skip
        got = [x.get_text() for x in ax.texts if x.get_text() != "P"]  # the column's header aside
        assert sorted(got) == sorted(want) and len(want) >= 2
        assert any(x != "0.50" for x in got)
