"""The paper's claims as Claim objects: fields, margins, the task's claims, the Table 3 knobs of the paper data."""

import dataclasses

import numpy as np
import pytest

from analysis.data.claims import Claim, as_claims, claim_rows, claims_for, table3_claims
from analysis.data.paper import KNOBS, load_table3, row_overrides
from analysis.report.evalsets import set_claims
from analysis.stats.verdicts import judge
from transformer_core.knobs import PAPER_COLUMNS, knob


def test_a_claim_is_frozen_and_normalised():
    c = Claim("x", [["R1", "<", "base"]], readings=["dev_ce"], margin={"dev_ce": 0.1})
    assert c.comparisons == (("R1", "<", "base"),) and c.readings == ("dev_ce",)
    assert c.margin_for("dev_ce") == 0.1 and c.margin_for("dev_bleu") is None
    assert Claim("y", [("R1", "~", "base")], margin=0.5).margin_for("anything") == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.id = "z"
    assert c["id"] == "x"
    with pytest.raises(KeyError):
        c["nothing"]


def test_every_claim_of_the_paper_is_complete():
    ids = [c.id for c in table3_claims()]
    assert len(set(ids)) == len(ids) == 8
    for c in table3_claims():
        assert c.text and c.kind and c.readings and c.comparisons
        assert all(rel in ("<", ">", "~") for _, rel, _ in c.comparisons)
        for reading in c.readings:  # an equivalence is decided against a margin stated before any result
            assert (c.margin_for(reading) is not None) == any(rel == "~" for _, rel, _ in c.comparisons)


def test_a_mapping_is_judged_like_the_claim_it_describes():
    rng = np.random.default_rng(3)
    values = {r: 20 + rng.standard_normal(3) for r in ("base", "E1")}
    values["E1"] += 0.2
    claim = next(c for c in table3_claims() if c.id == "E-learned-positions")
    as_dict = {"id": claim.id, "readings": ("dev_bleu",), "comparisons": [("E1", "~", "base")],
               "margin": {"dev_bleu": 1.0}}  # fmt: skip
    a = judge({"dev_bleu": values}, [claim]).claims[0]
    b = judge({"dev_bleu": values}, [as_dict]).claims[0]
    assert (a.verdict, a.comparisons[0].p, a.comparisons[0].margin) == (b.verdict, b.comparisons[0].p, 1.0)
    assert as_claims([as_dict])[0] == Claim(claim.id, [("E1", "~", "base")], ("dev_bleu",), margin={"dev_bleu": 1.0})


def test_a_language_model_judges_perplexity_and_sets_aside_bleu_only_claims():
    judged, apart = claims_for("lm")
    assert [c.id for c in apart] == ["D-ls-helps-bleu"]
    assert all(c.readings == ("dev_ce",) for c in judged) and len(judged) == len(table3_claims()) - 1
    assert claims_for("translation")[0] == table3_claims()


def test_an_evaluation_set_carries_the_dev_margins_over():
    e1 = next(c for c in set_claims("ood") if c.id == "E-learned-positions")
    assert e1.readings == ("ood:bleu", "ood:ce")  # no chrF margin was stated: no equivalence on chrF
    assert (e1.margin_for("ood:bleu"), e1.margin_for("ood:ce")) == (1.0, 0.025)
    d1 = next(c for c in set_claims("ood") if c.id == "D-dropout-helps")
    assert d1.readings == ("ood:bleu", "ood:chrf", "ood:ce")


def test_claim_rows_name_best_of_candidates():
    rows = claim_rows()
    assert rows["A-one-head"] == ["A1", "base", "A2", "A3", "A4"]
    assert rows["C-bigger-better"][:2] == ["C1", "base"]


def test_the_paper_knobs_come_from_the_knob_table():
    """The Table 3 columns that configure a trained model; train_steps is the spec's (scaled by the profile)."""
    assert KNOBS == tuple(n for n in PAPER_COLUMNS if n != "train_steps")
    base = load_table3()[0]
    assert set(KNOBS) <= set(base)  # every knob is a column of the paper's table
    assert set(row_overrides(base)) == {k for k in KNOBS if knob(k).where == "model"}
    assert "eps_ls" in KNOBS and "eps_ls" not in row_overrides(base)  # label smoothing is the recipe's


def test_the_papers_claims_are_read_when_asked_not_at_import():
    """Importing every module of analysis/ and sweeps/ does not read sweeps/specs/table3.yaml: the paper's claims
    are loaded by a function on first use (a module-level constant would read the spec at import)."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    code = (
        "import importlib, pkgutil, analysis, sweeps\n"
        "for pkg in (analysis, sweeps):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'):\n"
        "            importlib.import_module(m.name)\n"
        "from analysis.data import claims\n"
        "print(claims._paper.cache_info().misses)\n"
        "claims.table3_claims()\n"
        "print(claims._paper.cache_info().misses)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1"], out.stderr[-2000:]
