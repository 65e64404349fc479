"""Hostile text in a sweep's records reaching the report (issue 52): matplotlib's mathtext in group names."""

import json
from pathlib import Path

import pytest

from analysis.data.text import _number
from analysis.report.writers import write_report
from tests.analysis.test_analysis import make_sweep

FIXTURE = {"base": {1: (20.0, 5.0), 2: (21.0, 5.1)}, "X1": {1: (15.0, 6.0), 2: (16.0, 6.1)}}


def test_a_group_name_with_dollar_signs_is_drawn_as_written(tmp_path):
    sweep = make_sweep(tmp_path / "sweep", FIXTURE)
    for path in sweep.glob("trials/X1-*/trial.json"):
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "group": "x$\\frac$ y"}))
    for path in sweep.glob("trials/*"):  # learning curves: one panel per group, titled with its name
        evals = [{"kind": "eval", "step": s, "dev_ce": 6.0 - s / 100, "dev_ppl": 9.0 - s / 50} for s in (50, 250)]
        (path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    out = write_report(sweep, samples=50)  # matplotlib's mathtext refused "$\\frac$": the report was not written
    assert '<img alt="learning curves"' in (out / "report.html").read_text()


# control characters, spreadsheet formulas and HTML in spec text (item 9) ------------------------------------------

ESC_TEXT = "\x1b[31mred\x07 \u202eevil"  # a terminal escape, BEL, a right-to-left override


def _spec_text_sweep(root):
    from analysis.data.claims import claim_document, parse_claims

    sweep = make_sweep(root, FIXTURE)
    for path in sweep.glob("trials/X1-*/trial.json"):
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "group": f"=1+2 {ESC_TEXT}"}))
    state = json.loads((sweep / "sweep.json").read_text())
    claims = parse_claims([{"id": "x-worse", "compare": "X1 < base", "text": '=HYPERLINK("http://127.0.0.1/x","y")'},
                           {"id": "x-bell", "compare": "X1 < base", "text": f"@SUM(1) {ESC_TEXT}"}],
                          ["base", "X1"])  # fmt: skip
    state["report"] = {"title": f"Study {ESC_TEXT}", "description": f"<script>alert(1)</script><img src=x> {ESC_TEXT}",
                       "paper": {}, "claims": [claim_document(c) for c in claims]}  # fmt: skip
    (sweep / "sweep.json").write_text(json.dumps(state))
    return sweep


def test_spec_text_reaches_no_file_with_a_control_character_a_formula_or_a_tag(tmp_path):
    import csv

    out = write_report(_spec_text_sweep(tmp_path / "sweep"), tmp_path / "r", samples=20)
    for path in out.iterdir():
        if path.suffix in (".md", ".csv", ".html", ".tex"):
            text = path.read_text()
            assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or c == "\u202e"], path.name
    md = (out / "report.md").read_text()
    assert "<script" not in md and "<img" not in md and "&lt;script>alert(1)&lt;/script>" in md
    assert "\\x1b[31mred\\x07 \\u202eevil" in md  # escaped, still legible
    with open(out / "claims.csv", newline="") as f:
        texts = {r["claim"]: r["text"] for r in csv.DictReader(f)}
    assert texts["x-worse"] == '\'=HYPERLINK("http://127.0.0.1/x","y")'
    assert texts["x-bell"].startswith("'@SUM(1) \\x1b")
    with open(out / "table.csv", newline="") as f:
        cells = [c for row in csv.reader(f) for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "@") or (c[:1] == "-" and len(c) > 1 and not _number(c))]


def test_spreadsheet_cells_and_markdown_text():
    from analysis.data.text import markdown_text, printable, spreadsheet_cell

    assert spreadsheet_cell("-0.52") == "-0.52" and spreadsheet_cell("-") == "-" and spreadsheet_cell(3) == 3
    assert spreadsheet_cell("+1+cmd|' /C calc'!A0") == "'+1+cmd|' /C calc'!A0"
    assert spreadsheet_cell("-2+3") == "'-2+3" and spreadsheet_cell("\t=1") == "\\x09=1"
    assert markdown_text("p < 0.05, a <= b\nnext <b>x</b> <!-- c -->") == (
        "p < 0.05, a <= b\nnext &lt;b>x&lt;/b> &lt;!-- c -->"
    )
    assert printable("a\u200bb\ufeff\x9b") == "a\\u200bb\\ufeff\\x9b"


def test_plan_prints_a_groups_control_characters_escaped(tmp_path, capsys):
    from sweeps.cli import main
    from tests.helpers import write_spec

    spec = write_spec(tmp_path / "s.yaml", rows={f"g\x1b[2J{ESC_TEXT}": [{"label": "P0", "P_drop": 0.0}]})
    assert main(["plan", str(spec), "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "g\\x1b[2J" in out


def test_an_error_line_prints_spec_text_escaped(tmp_path, capsys):
    from tests.helpers import refused, write_spec

    spec = write_spec(tmp_path / "s.yaml", rows={f"g\x1b[2J{ESC_TEXT}": [{"label": "P0", "set": {"P_drop": 0}}]})
    err = refused(["plan", spec, "--profile", "smoke"], capsys, "rows.g\\x1b[2J")
    assert "\x1b" not in err and "\u202e" not in err


# claim records edited by hand (item 12) ---------------------------------------------------------------------------

EDITED = [
    ({"readings": ["bogus"]}, "report.claims[0].readings is ['bogus']"),
    ({"readings": "dev_ce"}, "report.claims[0].readings is 'dev_ce'"),
    ({"readings": []}, "report.claims[0].readings is []"),
    ({"readings": ["dev_ce", "dev_ce"]}, "report.claims[0].readings"),
    ({"margin": "x", "comparisons": [["X1", "~", "base"]]}, "report.claims[0].margin: 'x' is invalid"),
    ({"comparisons": [["X1", "~", "base"]]}, "a '~' comparison needs a margin"),
    ({"margin": {"dev_ce": 0.1}, "comparisons": [["X1", "~", "base"]]}, "no margin for dev_bleu"),
    ({"comparisons": []}, "report.claims[0].comparisons is []"),
    ({"comparisons": [["X1", "<", "best:X1"]]}, "report.claims[0].comparisons[0][2]"),
    ({"comparisons": [["X1", "<", "base"], ["base", ">", "X1"]]}, "compares the rows of compare[0]"),
    ({"comparisons": [["X1", "<", 3]]}, "report.claims[0].comparisons[0][2] is 3"),
    ({"comparisons": [["X1/..", "<", "base"]]}, "report.claims[0].comparisons[0][0]"),
    ({"id": "a b"}, "report.claims[0].id is 'a b'"),
    ({"text": 5}, "report.claims[0].text is 5"),
    ({"kind": ["x"]}, "report.claims[0].kind"),
]


@pytest.mark.parametrize(("edit", "needle"), EDITED, ids=[n.split(" is")[0][:40] + str(i) for i, (_, n) in
                                                          enumerate(EDITED)])  # fmt: skip
def test_a_hand_edited_claim_record_is_one_line_naming_its_field(tmp_path, edit, needle):
    from analysis.data.claims import recorded_claims
    from transformer_core.errors import UserError

    doc = {"id": "x-worse", "text": "X1 worse", "kind": "other", "readings": ["dev_bleu", "dev_ce"],
           "comparisons": [["X1", "<", "base"]], "margin": None, **edit}  # fmt: skip
    with pytest.raises(UserError, match="wrong shape \\(edited by hand\\?\\)") as info:
        recorded_claims([doc], "'S'")
    assert needle in str(info.value) and "\n" not in str(info.value)
    sweep = make_sweep(tmp_path / "sweep", FIXTURE)  # and the report says so in one line, writing nothing
    state = json.loads((sweep / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps({**state, "report": {"title": "t", "paper": {}, "claims": [doc]}}))
    with pytest.raises(UserError, match="wrong shape"):
        write_report(sweep, samples=20)
    assert not (sweep / "report").exists()


# report folders written whole (item 10) ---------------------------------------------------------------------------


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_an_interrupted_report_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    import analysis.report.writers

    sweep = make_sweep(tmp_path / "sweep", FIXTURE)
    out = write_report(sweep, samples=20)
    (out / "claims-gone.csv").write_text("a stale file of an earlier report\n")
    before = _files(out)

    def interrupted(*drawn):  # SIGINT after report.md and the CSVs, before report.html
        raise KeyboardInterrupt

    monkeypatch.setattr(analysis.report.writers, "page", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_report(sweep, samples=20)
    assert _files(out) == before  # report.md and the CSVs were new, report.html old
    assert sorted(p.name for p in sweep.iterdir()) == ["report", "sweep.json", "trials"]  # no temporary folder left
    monkeypatch.undo()
    write_report(sweep, samples=20)
    assert "claims-gone.csv" not in _files(out) and set(_files(out)) == set(before) - {"claims-gone.csv"}


def test_an_interrupted_first_report_leaves_no_report_folder(tmp_path, monkeypatch):
    import analysis.report.writers

    sweep = make_sweep(tmp_path / "sweep", FIXTURE)
    monkeypatch.setattr(analysis.report.writers, "page", lambda *drawn: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        write_report(sweep, samples=20)
    assert sorted(p.name for p in sweep.iterdir()) == ["sweep.json", "trials"]  # report.md without report.html was


def test_an_interrupted_search_report_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    import analysis.report.search_report as sr

    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text(json.dumps({"name": "s", "spec": "s.yaml", "profile": "smoke"}))
    out = sr.write_search_report(tmp_path / "sweep")
    before = _files(out)
    monkeypatch.setattr(sr, "render_html", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        sr.write_search_report(tmp_path / "sweep")
    assert _files(out) == before and sorted(p.name for p in out.parent.iterdir()) == ["report", "sweep.json"]


def test_a_report_out_folder_of_other_files_is_refused_before_anything_is_written(tmp_path, capsys):
    from tests.helpers import refused

    sweep = make_sweep(tmp_path / "sweep", FIXTURE)
    mine = tmp_path / "documents"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    (mine / "report.md").write_text("an old report")
    refused(["report", sweep, "--out", mine, "--bootstrap", "20"], capsys, "holds 'thesis.tex', which no report writes")
    assert _files(mine) == {"thesis.tex": b"mine", "report.md": b"an old report"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents", "sweep"]


def test_the_swap_without_an_atomic_exchange(tmp_path, monkeypatch):
    import analysis.data.files

    monkeypatch.setattr(analysis.data.files, "_exchange", lambda a, b: False)  # another system: rename aside, then in
    out = tmp_path / "report"
    for text in ("first", "second"):
        with analysis.data.files.whole_folder(out) as tmp:
            (tmp / "report.md").write_text(text)
    assert _files(out) == {"report.md": b"second"} and sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    assert oct(out.stat().st_mode & 0o777) != oct(0o700)  # readable as any folder the user makes, not mkdtemp's 0700


def test_a_read_only_report_folder_or_a_full_disk_is_one_line_and_the_report_stays(tmp_path, monkeypatch):
    import errno
    import os

    import analysis.data.files
    from transformer_core.errors import UserError

    out = tmp_path / "report"
    with analysis.data.files.whole_folder(out) as tmp:
        (tmp / "report.md").write_text("first")
    real_access = os.access
    monkeypatch.setattr(analysis.data.files.os, "access", lambda p, m: False if Path(p) == out else real_access(p, m))
    with pytest.raises(UserError, match="is read-only: allowed a writable folder"):  # chmod 555 (root passes)
        with analysis.data.files.whole_folder(out):
            pass
    monkeypatch.undo()
    with pytest.raises(UserError, match="no space left to write the report .*: the previous report is kept"):
        with analysis.data.files.whole_folder(out) as tmp:
            raise OSError(errno.ENOSPC, "No space left on device")
    assert _files(out) == {"report.md": b"first"} and sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_a_result_with_nan_infinity_or_a_huge_reading_is_a_corrupt_trial(tmp_path):
    from analysis.data.collect import collect

    sweep = make_sweep(tmp_path / "sweep", FIXTURE)
    for seed, text in ((1, '"dev_bleu": NaN'), (2, '"dev_ppl": Infinity')):
        path = next(sweep.glob(f"trials/X1-s{seed}-*/result.json"))
        record = json.loads(path.read_text())
        key = text.split('"')[1]
        path.write_text(json.dumps({**record, key: 0.0}).replace(f'"{key}": 0.0', text))
    path = next(sweep.glob("trials/base-s1-*/result.json"))
    path.write_text(json.dumps({**json.loads(path.read_text()), "params": 1e308}))
    status = collect(sweep).set_index("trial_id")["status"]
    assert status.filter(like="X1").tolist() == ["corrupt: result.json"] * 2  # read as a reading, silently, before
    assert status.filter(like="base-s1").tolist() == ["corrupt: result.json"]
    assert status.filter(like="base-s2").tolist() == ["finished"]
