"""`tsweep plan` of a study of one's own: the knobs its rows vary (beyond Table 3's columns) are columns, and a row
whose parameter count differs from base's by more than analysis.stats.scale.CONFOUND_FRACTION is named; the report
names it too."""

import json

from analysis.stats.scale import CONFOUND_FRACTION, confound_line, param_confounds, sized_rows
from sweeps.cli import main
from tests.helpers import write_spec

ROWS = {"N": [{"label": "pre", "norm": "pre"}, {"label": "gelu", "activation": "gelu"},
              {"label": "learned", "positional": "learned"}]}  # fmt: skip


def _plan(tmp_path, capsys, **doc) -> list[str]:
    spec = write_spec(tmp_path / "own.yaml", rows=ROWS, seeds=[1], **doc)
    capsys.readouterr()
    assert main(["plan", str(spec), "--profile", "smoke", "--device-flops", "1e12"]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_plan_shows_the_knobs_the_rows_vary(tmp_path, capsys):
    out = _plan(tmp_path, capsys)
    head = next(line for line in out if line.startswith("group"))
    assert "norm" in head.split() and "activation" in head.split()
    rows = {line.split()[1]: line.split() for line in out if line.split() and line.split()[0] in ("base", "N")}
    norm, act = head.split().index("norm"), head.split().index("activation")
    assert (rows["base"][norm], rows["pre"][norm]) == ("post", "pre")
    assert (rows["base"][act], rows["gelu"][act]) == ("relu", "gelu")


def test_the_plan_names_a_row_whose_size_is_a_confound(tmp_path, capsys):
    out = _plan(tmp_path, capsys)
    line = next(x for x in out if x.startswith("Parameter count confound"))
    assert "learned +" in line and "pre " not in line and "gelu" not in line
    ROWS["N"].append({"label": "wide", "d_model": 1024, "d_ff": 4096})  # varies the size on purpose: no confound
    try:
        out = _plan(tmp_path, capsys)
    finally:
        ROWS["N"].pop()
    line = next(x for x in out if x.startswith("Parameter count confound"))
    assert "learned +" in line and "wide" not in line


def test_the_confound_rule_is_beyond_the_stated_fraction_either_way():
    edge = 1 + CONFOUND_FRACTION
    got = param_confounds({"base": 100.0, "same": 100.0, "edge": 100.0 * edge, "big": 200.0, "small": 50.0})
    assert list(got) == ["big", "small"] and got["small"] == -0.5
    knobs = {"base": {"d_model": 512, "h": 8}, "big": {"d_model": 1024, "h": 8}, "small": {"d_model": 512, "h": 8},
             "heads": {"d_model": 512, "h": 16}}  # fmt: skip
    assert sized_rows(knobs) == {"big", "heads"}
    assert list(param_confounds({"base": 1.0, "big": 2.0, "small": 0.5}, sized_rows(knobs))) == ["small"]
    assert confound_line({}) == "" and "big +100%" in confound_line({"big": 1.0})


def test_the_report_names_the_confound(tmp_path):
    from analysis.report.writers import write_report
    from tests.analysis.test_analysis import FIXTURE, make_sweep

    root = make_sweep(tmp_path / "s", {r: FIXTURE[r] for r in ("base", "D1", "E1")})
    for trial in (root / "trials").glob("E1-*"):
        result = json.loads((trial / "result.json").read_text())
        (trial / "result.json").write_text(json.dumps({**result, "params": 1_770_000}))
    md = (write_report(root, tmp_path / "r", samples=20) / "report.md").read_text()
    assert "**Parameter count confound**: E1 +77% parameters against base" in md


def test_asha_in_an_ablation_is_one_warning_line_in_the_plan(tmp_path, capsys):
    """docs/search.md advises against early stopping in an ablation: plan says so in one line (issue 53); a plan
    without a scheduler, or a search with one, says nothing of it."""
    out = _plan(tmp_path, capsys, scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2})
    warned = [x for x in out if "warning" in x]
    assert len(warned) == 1 and warned[0].startswith("warning: scheduler asha stops the trials"), warned
    assert "docs/search.md#early-stopping" in warned[0]
    assert not [x for x in _plan(tmp_path, capsys) if "warning" in x]
