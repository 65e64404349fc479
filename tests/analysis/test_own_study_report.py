"""A study with no paper rows reads as its own: no paper panel, legend, column or sentence; a Table 3 sweep keeps
every one of them."""

import csv
import json

import pandas as pd

import analysis.report.plots
from analysis.data.claims import claim_document, parse_claims
from analysis.data.collect import collect
from analysis.report.tables import reproduction_table
from analysis.report.writers import write_report
from tests.analysis.test_analysis import make_sweep

ROWS = ["base", "D1", "E1"]
OWN = {"base": {1: (20.0, 5.0), 2: (21.0, 5.1), 3: (22.0, 4.9)}, "D1": {1: (19.0, 5.6), 2: (18.5, 5.7), 3: (19.5, 5.5)},
       "E1": {1: (20.5, 5.0), 2: (21.0, 5.05), 3: (21.5, 4.95)}}  # fmt: skip
LEFTOVERS = ("the paper's side", "not comparable with the paper's", "its seeds and the paper's",
             "no claim of the paper", "(paper)", "Paper: base")  # fmt: skip


def _own(root):
    root = make_sweep(root, OWN)
    state = json.loads((root / "sweep.json").read_text())
    claims = parse_claims([{"id": "nodrop-worse", "compare": "D1 < base"}], ROWS)
    state["report"] = {"title": "Own study", "description": "", "paper": {},
                       "claims": [claim_document(c) for c in claims]}  # fmt: skip
    (root / "sweep.json").write_text(json.dumps(state))
    return root


def test_an_own_study_has_no_paper_leftovers(tmp_path):
    out = write_report(_own(tmp_path / "own"), tmp_path / "r", samples=20)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    for text in LEFTOVERS:
        assert text not in md, text
        assert text.replace("'", "&#x27;") not in page, text
    assert "decided on the claim's side" in md and "Rows that no claim covers" in md
    with open(out / "table.csv", newline="") as f:
        header = next(csv.reader(f))
    assert "bleu_dev" in header and not [c for c in header if c.startswith("paper_")]


def test_a_table3_sweep_keeps_the_papers_words_and_columns(tmp_path):
    out = write_report(make_sweep(tmp_path / "t3"), tmp_path / "r", samples=20)
    md = (out / "report.md").read_text()
    for text in ("the paper's side", "not comparable with the paper's", "its seeds and the paper's"):
        assert text in md, text
    assert "paper_bleu_dev" in (out / "table.csv").read_text().splitlines()[0]


def _figures(monkeypatch):
    figs = []
    monkeypatch.setattr(analysis.report.plots, "_png", lambda fig: figs.append(fig) or "png")
    return figs


def test_the_plots_draw_the_paper_only_where_a_row_shows_it(tmp_path, monkeypatch):
    figs = _figures(monkeypatch)
    own, t3 = collect(_own(tmp_path / "own")), collect(make_sweep(tmp_path / "t3"))
    t_own = reproduction_table(own, samples=5, paper_rows={})
    t_t3 = reproduction_table(t3, samples=5)
    analysis.report.plots.forest(own, t_own, ("dev_bleu", "dev_ce"))
    analysis.report.plots.forest(t3, t_t3, ("dev_bleu", "dev_ce"))
    assert "the paper (orange)" not in figs[0]._suptitle.get_text()
    assert "the paper (orange)" in figs[1]._suptitle.get_text()
    sized = pd.DataFrame({"row": ["base", "D1"], "n": [3, 3], "params_M": [1.0, 2.0], "bleu_dev": [20.0, 19.0],
                          "bleu_dev_ci": [0.5, 0.5]})  # fmt: skip
    figs.clear()
    analysis.report.plots.bleu_vs_params(sized.assign(paper_params_M=float("nan"), paper_bleu_dev=float("nan")))
    analysis.report.plots.bleu_vs_params(sized.assign(paper_params_M=[65.0, 60.0], paper_bleu_dev=[25.8, 25.0]))
    assert [ax.get_title() for ax in figs[0].axes] == ["ours (at the profile's scale)"]
    assert [ax.get_title() for ax in figs[1].axes] == ["ours (at the profile's scale)", "paper (newstest2013)"]
