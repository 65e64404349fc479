"""Claims as data in a spec: parsed with one-line errors, judged by the same engine in the report's one family, and
a report shaped by its spec (title, description, its own claims, the paper's columns only where a row names one)."""

import json

import numpy as np
import pytest
import yaml

from analysis.data.claims import TABLE3_SPEC, Claim, claim_document, parse_claims, recorded_claims, table3_claims
from analysis.report.writers import write_report
from analysis.stats.rule import Rule
from benchmarks.simulate import Shape, report_errors
from sweeps.spec.sweep_spec import SpecError, parse_spec
from tests.analysis.test_analysis import make_sweep
from transformer_core.errors import UserError

# The paper's claims as analysis/data/claims.py held them in code before they moved into sweeps/specs/table3.yaml:
# the same Claim objects, so every published Table 3 verdict is judged exactly as before.
BEFORE = [
    Claim("A-one-head", kind="attention",
          text="Single-head attention is worse than the best head count (paper: 0.9 BLEU worse)",
          comparisons=[("A1", "<", "best:base,A2,A3,A4")]),
    Claim("A-too-many-heads", kind="attention", text="Quality also drops off with too many heads (A4 below the best)",
          comparisons=[("A4", "<", "best:base,A2,A3")]),
    Claim("B-smaller-dk", kind="capacity", text="Reducing the attention key size d_k hurts model quality",
          comparisons=[("B1", "<", "base"), ("B2", "<", "base")]),
    Claim("C-bigger-better", kind="capacity", text="Bigger models are better",
          comparisons=[("C1", "<", "base"), ("C2", "<", "base"), ("C3", ">", "base"), ("C4", "<", "base"),
                       ("C5", ">", "base"), ("C6", "<", "base"), ("C7", ">", "base")]),
    Claim("D-dropout-helps", kind="regularisation",
          text="Dropout is very helpful in avoiding over-fitting (D1, no dropout, is worse)",
          comparisons=[("D1", "<", "base")]),
    Claim("D-ls-hurts-ppl", kind="regularisation", readings=("dev_ce",),
          text="Label smoothing hurts perplexity (D3, no smoothing, has lower PPL)", comparisons=[("D3", ">", "base")]),
    Claim("D-ls-helps-bleu", kind="regularisation", readings=("dev_bleu",),
          text="Label smoothing improves BLEU (D3, no smoothing, has lower BLEU)", comparisons=[("D3", "<", "base")]),
    Claim("E-learned-positions", kind="positional",
          text="Learned positional embeddings give nearly identical results to sinusoids",
          comparisons=[("E1", "~", "base")], margin={"dev_bleu": 1.0, "dev_ce": 0.025}),
]  # fmt: skip

ROWS = ["base", "P0", "P2", "P3"]


def test_the_paper_claims_come_from_table3_yaml_unchanged():
    assert table3_claims() == BEFORE
    doc = yaml.safe_load(TABLE3_SPEC.read_text())
    assert parse_spec(doc).claims == BEFORE  # the spec states them; the report judges what it states
    assert [Claim.of(claim_document(c)) for c in table3_claims()] == BEFORE  # sweep.json's record reads back the same


def test_a_users_claims_parse_from_words():
    claims = parse_claims(
        [
            {"id": "nodrop-worse", "compare": "P0 < base", "readings": ["dev_ce"]},
            {"id": "best", "compare": ["P3 > best of P0, P2"], "kind": "regularisation"},
            {"id": "same", "compare": "P2 ~ base", "margin": 0.5, "text": "0.2 is as good as 0.1"},
        ],
        ROWS,
    )
    assert claims[0] == Claim("nodrop-worse", [("P0", "<", "base")], ("dev_ce",), "P0 worse than base", "other")
    assert claims[1].comparisons == (("P3", ">", "best:P0,P2"),) and claims[1].readings == ("dev_bleu", "dev_ce")
    assert claims[1].text == "P3 better than the best of P0, P2"
    assert claims[2].margin_for("dev_ce") == 0.5 and claims[2].text == "0.2 is as good as 0.1"
    assert parse_claims("table3", ROWS) == table3_claims() and parse_claims(None, ROWS) == []
    lm = parse_claims([{"id": "x", "compare": "P0 < base"}], ROWS, task="lm")
    assert lm[0].readings == ("dev_ce",)


@pytest.mark.parametrize(
    "claims, message",
    [
        ([{"id": "x", "compre": "P0 < base"}], r"claims\[0\]: unknown key 'compre' \(did you mean 'compare'\?\)"),
        ([{"id": "x", "compare": "P00 < base"}], r"claims\[0\].compare\[0\]: row 'P00' .*did you mean 'P0'"),
        ([{"id": "x", "compare": "P0 << base"}], r"compare\[0\]: 'P0 << base' is invalid; allowed 'ROW < ROW'"),
        ([{"id": "x", "compare": "P0 < P0"}], "compared with itself"),
        ([{"id": "x", "compare": "P0 < best of P2"}], "'best of' needs two or more different rows"),
        ([{"id": "x", "compare": "P0 ~ base"}], r"margin: a '~' comparison needs a margin"),
        ([{"id": "x", "compare": "P0 < base", "margin": 1}], "a margin is for '~', '>=' and '<=' comparisons only"),
        ([{"id": "x", "compare": "P0 ~ base", "margin": {"dev_bleu": 1}}], "no margin for dev_ce"),
        ([{"id": "x", "compare": "P0 ~ base", "margin": -1}], r"margin: -1 is invalid; allowed a number > 0"),
        ([{"id": "x", "compare": "P0 < base", "readings": ["dev_bleau"]}], "did you mean 'dev_bleu'"),
        ([{"id": "x", "compare": "P0 < base", "kind": "capcity"}], "did you mean 'capacity'"),
        ([{"id": "a b", "compare": "P0 < base"}], r"claims\[0\].id: 'a b' is invalid"),
        ([{"id": "x", "compare": "P0 < base"}, {"id": "x", "compare": "P2 < base"}], "used twice"),
        ("table4", "did you mean 'table3'"),
        ({"id": "x"}, "expected a list of claims"),
    ],
)
def test_a_bad_claim_is_one_line_naming_what_is_wrong(claims, message):
    with pytest.raises(UserError, match=message) as err:
        parse_claims(claims, ROWS)
    assert "\n" not in str(err.value)


def test_a_spec_checks_its_claims_against_its_rows_and_task():
    doc = {"name": "pdrop", "seeds": [1, 2], "rows": {"P": [{"label": "P0", "P_drop": 0.0}]}}
    spec = parse_spec({**doc, "claims": [{"id": "nodrop", "compare": "P0 < base"}], "title": "Dropout"})
    assert [c.id for c in spec.claims] == ["nodrop"] and spec.paper == {}
    assert spec.report_record()["claims"][0]["comparisons"] == [["P0", "<", "base"]]
    with pytest.raises(SpecError, match=r"claims\[0\].compare\[0\]: row 'P1' is not a row of this spec"):
        parse_spec({**doc, "claims": [{"id": "x", "compare": "P1 < base"}]})
    with pytest.raises(SpecError, match="with task lm"):
        lm = {**doc, "task": "lm", "corpus": {"name": "bible-en-de", "direction": "en"}}
        parse_spec({**lm, "claims": [{"id": "x", "compare": "P0 < base", "readings": ["dev_bleu"]}]})
    with pytest.raises(SpecError, match="paper: 'P0' is not a row of Table 3"):
        parse_spec({**doc, "paper": {"P0": "P0"}})
    assert parse_spec({**doc, "paper": {"P0": "D1"}}).paper == {"P0": "D1"}
    assert parse_spec({**doc, "paper": "table3"}).paper == {"base": "base"}


def test_a_damaged_record_of_claims_is_one_line():
    with pytest.raises(UserError, match="records claims of the wrong shape"):
        recorded_claims([{"id": "x", "comparisons": [["a", "<<", "b"]]}], "'d'")
    assert recorded_claims([claim_document(c) for c in table3_claims()], "'d'") == table3_claims()


def _counts(claims, effects, tables, seeds=3, seed=0):
    rng = np.random.default_rng(seed)
    out = {"any_false": 0, "found": 0, "real": 0}
    for _ in range(tables):
        o = report_errors(rng, Shape(seeds=seeds, rows=ROWS), Rule(), effects, claims)
        out["any_false"] += o["false"] > 0
        out["found"] += o["found"]
        out["real"] += o["real"]
    return out["any_false"] / tables, out["found"] / max(out["real"], 1)


@pytest.mark.parametrize("seeds", [2, 3])
def test_a_users_claim_keeps_the_reports_error_rate_with_no_effect_anywhere(seeds):
    """A four-row spec of one's own (a claim P0 < base on both readings; P2, P3 against base), no real effect:
    reports with any false decided comparison stay within a band around alpha = 5% (1,200 tables: sd 0.6%).
    Before small tables took the pooled test (seed_noise.MIN_ROWS_PRIOR) this shape read 6.6-7%."""
    claims = parse_claims([{"id": "nodrop-worse", "compare": "P0 < base"}], ROWS)
    rate, _ = _counts(claims, {}, 1200, seeds)
    assert 0.015 <= rate <= 0.062


def test_a_users_claim_is_found_at_three_seed_sd():
    """Power of the same claim when P0 is truly 3 seed-sd worse (3 seeds): about 70%, in a band."""
    claims = parse_claims([{"id": "nodrop-worse", "compare": "P0 < base"}], ROWS)
    _, power = _counts(claims, {"P0": -3.0}, 300, seed=1)
    assert 0.55 <= power <= 0.9


def _sweep_with(tmp_path, record):
    root = make_sweep(tmp_path / "sweep")
    state = json.loads((root / "sweep.json").read_text())
    if record is not None:
        state["report"] = record
    (root / "sweep.json").write_text(json.dumps(state))
    return root


def test_the_report_is_shaped_by_its_spec(tmp_path):
    """A spec of one's own: its title and description, its claim alone, no paper columns or paper facts."""
    claim = parse_claims([{"id": "nodrop-worse", "compare": "D1 < base", "readings": ["dev_ce"]}], ["base", "D1"])
    record = {"title": "Dropout ablation", "description": "Does dropout matter here?", "paper": {},
              "claims": [claim_document(c) for c in claim]}  # fmt: skip
    out = write_report(_sweep_with(tmp_path, record), tmp_path / "r", samples=20)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert md.startswith("# Dropout ablation: fixture\n\nDoes dropout matter here?\n")
    assert "<h1>Dropout ablation: fixture</h1><p>Does dropout matter here?</p>" in page
    assert "## Claims, judged on these results" in md and "nodrop-worse" in md
    absent = ("A-one-head", "Claims not measured", "(paper)", "Paper: base", "The paper's claims", "Table 3 layout")
    for text in absent:
        assert text not in md, text
    assert "(paper)" not in page and "A-one-head" not in page


def test_a_spec_without_claims_has_no_claims_sections(tmp_path):
    record = {"title": "", "description": "", "paper": {"base": "base"}, "claims": []}
    out = write_report(_sweep_with(tmp_path, record), tmp_path / "r", samples=20)
    md = (out / "report.md").read_text()
    assert md.startswith("# fixture\n") and "claims" not in md.split("## Each row against base")[0].lower()
    assert "## Each row against base" in md and "| A1 |" in md  # every row judged against base instead
    assert "BLEU dev (paper)" in md  # base names the paper's base row: the paper's columns are shown


def test_a_sweep_recorded_before_specs_stated_claims_reads_as_table3(tmp_path):
    out = write_report(_sweep_with(tmp_path, None), tmp_path / "r", samples=20)
    md = (out / "report.md").read_text()
    assert md.startswith("# Table 3 reproduction: fixture\n") and "## The paper's claims, judged" in md
    assert "A-one-head" in md and "BLEU dev (paper)" in md


def test_amended_claims_are_named_in_the_report(tmp_path):
    record = {"title": "", "description": "", "paper": {}, "claims": [claim_document(table3_claims()[4])],
              "amended": [{"at": 0.0, "claims": ["D-dropout-helps"], "trials": 12}]}  # fmt: skip
    md = (write_report(_sweep_with(tmp_path, record), tmp_path / "r", samples=20) / "report.md").read_text()
    assert "**Claims amended**: D-dropout-helps changed after the sweep started, with 12 trials finished" in md


def test_a_damaged_report_record_is_one_line(tmp_path):
    with pytest.raises(UserError, match="records the report's title"):
        write_report(_sweep_with(tmp_path, {"title": 3, "paper": {}}), tmp_path / "r", samples=20)


def test_the_report_decides_on_e_values_when_asked(tmp_path):
    """`tsweep report --evidence e`: the header names e-BH and each comparison's evidence carries its e-value."""
    root = _sweep_with(tmp_path, None)
    md = (write_report(root, tmp_path / "e", samples=20, evidence="e") / "report.md").read_text()
    assert "e-BH" in md and ", e " in md
    md = (write_report(root, tmp_path / "p", samples=20) / "report.md").read_text()
    assert "e-BH" not in md and ", e " not in md


def test_the_readmes_annotated_spec_is_a_valid_spec_with_a_claim():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = text[text.index("## A spec, annotated") :].split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = parse_spec(yaml.safe_load(block))
    assert [c.id for c in spec.claims] == ["D-ls-helps-bleu"] and spec.paper["D3"] == "D3"


def test_the_notebook_api_and_compare_rules_judge_the_specs_claims(tmp_path):
    from analysis.report.rule_changes import write
    from sweeps.api import load_sweep

    claim = parse_claims([{"id": "nodrop-worse", "compare": "D1 < base", "readings": ["dev_ce"]}], ["base", "D1"])
    root = _sweep_with(tmp_path, {"title": "", "description": "", "paper": {},
                                  "claims": [claim_document(c) for c in claim]})  # fmt: skip
    assert list(load_sweep(root).verdicts["claim"]) == ["nodrop-worse"]
    _, table = write(root, tmp_path / "out")
    assert list(table["claim"]) == ["nodrop-worse"]
    legacy = _sweep_with(tmp_path / "legacy", None)
    assert "A-one-head" in set(load_sweep(legacy).verdicts["claim"])
