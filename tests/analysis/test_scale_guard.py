"""The scale guard (analysis/stats/scale.py): a test profile's report, log and MLflow parent run say that its verdicts
mean nothing, and a reading at its floor in every row of a claim is not judged."""

import json

import pandas as pd

from analysis.data.claims import claim_document, parse_claims
from analysis.data.collect import collect
from analysis.report.tables import judge_report
from analysis.report.writers import write_report
from analysis.stats.scale import NOT_MEASURABLE, profile_purpose, scale_guard
from sweeps.spec.profiles import get_profile, load_profiles
from tests.analysis.test_analysis import make_sweep

ROWS = ["base", "D1", "E1"]
CLAIMS = [
    {"id": "nodrop-worse", "compare": "D1 < base"},
    {"id": "learned-pos-ok", "compare": "E1 ~ base", "margin": {"dev_bleu": 1.0, "dev_ce": 0.5}},
]
# every BLEU near zero and equal across seeds (what a smoke trial scores); cross-entropy spread as trained models'
FLOORED = {
    "base": {1: (0.005, 5.0), 2: (0.005, 5.1), 3: (0.005, 4.9)},
    "D1": {1: (0.005, 5.6), 2: (0.005, 5.7), 3: (0.005, 5.5)},
    "E1": {1: (0.005, 5.0), 2: (0.005, 5.05), 3: (0.005, 4.95)},
}
TRAINED = {row: {s: (20.0 + 0.5 * s - (2 if row == "D1" else 0), ppl) for s, (_, ppl) in seeds.items()}
           for row, seeds in FLOORED.items()}  # fmt: skip


def _sweep(root, fixture, profile):
    root = make_sweep(root, fixture)
    state = json.loads((root / "sweep.json").read_text())
    claims = parse_claims(CLAIMS, ROWS)
    state.update(profile=profile, report={"title": "Own study", "description": "", "paper": {},
                                           "claims": [claim_document(c) for c in claims]})  # fmt: skip
    (root / "sweep.json").write_text(json.dumps(state))
    return root


def _claims(root) -> pd.DataFrame:
    stated = parse_claims(CLAIMS, ROWS)
    return judge_report(collect(root), claims=stated)[0].set_index(["claim", "reading"])


def test_the_profiles_purpose_is_read_alike_by_the_sweeps_and_the_report():
    assert get_profile("smoke").purpose == profile_purpose("smoke") == "test"
    for name, p in load_profiles().items():
        assert p.purpose == profile_purpose(name), name
        for alias in p.aliases:
            assert profile_purpose(alias) == p.purpose
    assert profile_purpose("cpu") == "results" and profile_purpose("no-such-profile") == "results"


def test_a_reading_at_its_floor_is_not_judged_and_the_header_says_so(tmp_path):
    """Every BLEU 0.005: the '~' claim would be "held" with p ~0 (equal within 1 BLEU); it is not measurable."""
    claims = _claims(_sweep(tmp_path / "s", FLOORED, "cpu"))
    bleu = claims.loc[("learned-pos-ok", "dev BLEU")]
    assert bleu["verdict"] == NOT_MEASURABLE and bleu["symbol"] == "?" and bleu["trajectory"] == ""
    assert claims.loc[("nodrop-worse", "dev BLEU"), "verdict"] == NOT_MEASURABLE
    ce = claims.loc[("nodrop-worse", "dev cross-entropy (nats, ln PPL)"), "verdict"]
    assert ce == "held"  # cross-entropy is not at a floor: judged as always
    md = (write_report(_sweep(tmp_path / "r", FLOORED, "cpu"), tmp_path / "out", samples=20) / "report.md").read_text()
    assert "**Reading at its floor**: dev BLEU is below 1 in every finished trial" in md
    assert "Test profile" not in md  # cpu is a results profile
    assert "| learned-pos-ok | dev BLEU | ? not measurable: reading at its floor |" in md


def test_the_same_claims_on_trained_readings_are_judged(tmp_path):
    claims = _claims(_sweep(tmp_path / "s", TRAINED, "cpu"))
    assert NOT_MEASURABLE not in set(claims["verdict"])
    assert claims.loc[("nodrop-worse", "dev BLEU"), "verdict"] == "held"
    assert not scale_guard(collect(tmp_path / "s")).header_lines(["dev_bleu", "dev_ce", "test_bleu"])


def test_a_test_profile_is_named_in_bold_and_every_claim_carries_its_caveat(tmp_path):
    root = _sweep(tmp_path / "s", TRAINED, "smoke")
    claims = _claims(root)
    assert len(claims) == 4 and all("smoke is a test profile" in c for c in claims["caveat"])
    assert claims.loc[("nodrop-worse", "dev BLEU"), "verdict"] == "held"  # computed, and marked as meaningless
    out = write_report(root, tmp_path / "out", samples=20)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    header = md.split("## Claims")[0]
    assert "**Test profile**: smoke is a profile for testing the pipeline" in header
    assert "<b>Test profile</b>: smoke is a profile for testing" in page
    assert md.count("smoke is a test profile: this verdict means nothing about the claim") == 8  # dev and test
    assert "smoke is a test profile" in (out / "claims.csv").read_text()
