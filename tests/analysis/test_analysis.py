import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.data.collect import collect
from analysis.report.tables import judge_report, reproduction_table
from analysis.report.writers import write_report

REFS = [f"sentence number {i} with several words in it for the bootstrap" for i in range(120)]
BAD = [" ".join(r.split()[:3]) for r in REFS]

# row -> per seed (dev_bleu, dev_ppl) ; None: the trial has no result (not finished)
FIXTURE = {
    "base": {1: (20.0, 5.0), 2: (21.0, 5.1), 3: (22.0, 4.9)},
    "A1": {1: (15.0, 6.0), 2: (16.0, 6.1), 3: (17.0, 5.9)},
    "A4": {1: None},
    "B1": {1: "diverged", 2: (19.0, 5.5), 3: (20.0, 5.4)},
    "D1": {1: (20.5, 5.0), 2: (21.5, 5.1), 3: (21.0, 5.0)},
    "D3": {1: (25.0, 4.50), 2: (25.2, 4.52), 3: (25.1, 4.51)},
    "E1": {1: (20.8, 5.0), 2: (21.0, 5.0), 3: (21.2, 5.0)},
}
GROUPS = {"base": "base", "A1": "A", "A4": "A", "B1": "B", "D1": "D", "D3": "D", "E1": "E"}


def make_sweep(root: Path, fixture: dict = FIXTURE) -> Path:
    trials = []
    for row, seeds in fixture.items():
        for seed, value in seeds.items():
            tid = f"{row}-s{seed}-0000abcd"
            trials.append(tid)
            wd = root / "trials" / tid
            wd.mkdir(parents=True)
            paper = {
                "N": 6,
                "d_model": 512,
                "d_ff": 2048,
                "h": 1 if row == "A1" else 8,
                "d_k": 64,
                "d_v": 64,
                "P_drop": 0.0 if row == "D1" else 0.1,
                "eps_ls": 0.0 if row == "D3" else 0.1,
                "positional": {"E1": "learned", "rope": "rope"}.get(row, "sinusoidal"),
                "train_steps": 100000,
            }
            (wd / "trial.json").write_text(
                json.dumps(
                    {
                        "id": tid,
                        "group": GROUPS.get(row, "mods"),
                        "row": row,
                        "seed": seed,
                        "paper": paper,
                        "values": {"steps": 250, "corpus": "fixture"},
                        "config_hash": "0000abcd" + "0" * 4,
                    }
                )
            )
            if value is None:
                (wd / "attempts.jsonl").write_text("{}\n")
                continue
            base = {
                "params": 1_000_000,
                "target_tokens": 1000,
                "train_flops": 6e9,
                "wall_seconds": 360.0,
                "device": "cpu",
                "precision": "fp32",
                "corpus_fingerprint": "f00d",
                "torch_version": "x",
                "sacrebleu_signature": "sig",
                "steps": 250,
            }
            if value == "diverged":
                (wd / "result.json").write_text(
                    json.dumps({**base, "status": "diverged", "reason": "non-finite training loss at step 7"})
                )
                continue
            bleu, ppl = value
            (wd / "result.json").write_text(
                json.dumps(
                    {
                        **base,
                        "status": "finished",
                        "dev_bleu": bleu,
                        "dev_ppl": ppl,
                        "test_bleu": bleu - 1,
                        "test_ppl": ppl,
                    }
                )
            )
            hyps = BAD if row == "A1" else REFS
            for split in ("dev", "test"):
                (wd / f"{split}.ref").write_text("\n".join(REFS) + "\n")
                (wd / f"{split}.hyp").write_text("\n".join(hyps) + "\n")
    (root / "sweep.json").write_text(
        json.dumps(
            {
                "name": "fixture",
                "spec": "fixture.yaml",
                "profile": "cpu",
                "profile_rules": {"profile": "cpu"},
                "trials": trials,
            }
        )
    )
    return root


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return make_sweep(tmp_path_factory.mktemp("fixture-sweep"))


@pytest.fixture(scope="module")
def table(sweep):
    return reproduction_table(collect(sweep), samples=200)


def test_collect_has_one_row_per_trial_with_status(sweep):
    df = collect(sweep)
    assert len(df) == 19
    assert df.set_index("trial_id").loc["A4-s1-0000abcd", "status"] == "running"
    assert df.set_index("trial_id").loc["B1-s1-0000abcd", "status"] == "diverged"
    assert (df["status"] == "finished").sum() == 17


def test_rows_in_paper_order(table):
    assert list(table["row"]) == ["base", "A1", "A4", "B1", "D1", "D3", "E1"]


def test_means_intervals_and_deltas(table):
    t = table.set_index("row")
    # rows with >= 2 seeds: base, A1 (var 1), B1 (0.5, 1 df), D1 (0.25), D3 (0.01), E1 (0.04): six rows, fewer
    # than the eight a prior is fitted from (seed_noise.MIN_ROWS_PRIOR), so the pooled variance on 11 df
    pooled = (2 * 1.0 + 2 * 1.0 + 0.5 + 2 * 0.25 + 2 * 0.01 + 2 * 0.04) / 11
    half = stats.t.ppf(0.975, 11) * math.sqrt(pooled / 3)
    assert t.loc["base", "bleu_dev"] == pytest.approx(21.0) and t.loc["base", "bleu_dev_ci"] == pytest.approx(half)
    assert t.loc["A1", "delta_bleu"] == pytest.approx(-5.0) and t.loc["A1", "paper_delta_bleu"] == pytest.approx(-0.9)
    ce_d3 = np.log([4.50, 4.52, 4.51]).mean() - np.log([5.0, 5.1, 4.9]).mean()
    assert t.loc["D3", "delta_ce"] == pytest.approx(ce_d3)
    assert t.loc["D3", "paper_delta_ce"] == pytest.approx(math.log(4.67 / 4.92))
    assert t.loc["B1", "n"] == 2 and "1 diverged" in t.loc["B1", "status"]
    assert t.loc["A4", "n"] == 0 and "1 running" in t.loc["A4", "status"]
    assert t.loc["base", "device_hours"] == pytest.approx(0.3)


def test_knob_columns_show_what_varies(table):
    t = table.set_index("row")
    assert t.loc["E1", "positional"] == "learned" and t.loc["base", "positional"] == "sinusoidal"
    assert "positional" in table.attrs["knobs"]


def test_sentence_sampling_p_is_a_column_not_a_verdict(table):
    t = table.set_index("row")
    assert t.loc["A1", "p_sentence_test"] < 0.05
    assert t.loc["E1", "p_sentence_test"] > 0.5
    assert t.loc["base", "p_sentence_test"] is None or math.isnan(t.loc["base", "p_sentence_test"])


def test_claim_verdicts(sweep):
    c = judge_report(collect(sweep))[0].set_index(["claim", "reading"])["verdict"].to_dict()
    bleu, ce = "dev BLEU", "dev cross-entropy (nats, ln PPL)"
    assert c[("A-one-head", bleu)] == "incomplete"  # 16 vs 21, but A4, a candidate for the best, never finished
    assert c[("A-too-many-heads", bleu)] == "not measured"  # A4 never finished
    assert c[("B-smaller-dk", bleu)] == "incomplete"  # B2 missing
    assert c[("D-dropout-helps", bleu)] == "within noise"  # D1 equal to base
    assert c[("D-ls-hurts-ppl", ce)] == "held"  # D3 PPL 4.51 vs 5.0
    assert c[("D-ls-helps-bleu", bleu)] == "contradicted"  # D3 BLEU 25.1 vs 21, the other way
    assert c[("C-bigger-better", bleu)] == "not measured"


def test_report_files(sweep, tmp_path):
    out = write_report(sweep, tmp_path / "r", samples=100)
    md = (out / "report.md").read_text()
    assert "| A1 |" in md and "not measured" in md and "diverged" in md and "running" in md
    assert "Seed noise" in md and "df 11" in md and "Budget" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 1 and "<table" in html and "BLEU dev (paper)" in html
    assert 'id="legend"' in html and "v-held" in html and "v-contradicted" in html
    assert 'href="#row-A1"' in html and 'id="row-A1"' in html and "class=diff" in html
    assert (out / "table.tex").read_text().startswith("\\begin{tabular}")
    assert "Benjamini-Hochberg (false discovery rate) over the report's family" in md and (out / "forest.png").exists()
    seeds = pd.read_csv(out / "seeds.csv")
    assert len(seeds) == 19 and {"row", "seed", "status", "dev_bleu", "dev_ce"} <= set(seeds.columns)
    per_claim = (write_report(sweep, tmp_path / "c", samples=20, family="claim") / "report.md").read_text()
    assert "per claim: Holm over each claim-reading's comparisons" in per_claim
    assert "bleu_dev" in (out / "table.csv").read_text().splitlines()[0]


def test_report_cli_errors_cleanly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sweeps.cli", "report", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "is not a sweep directory" in r.stderr and "Traceback" not in r.stderr


def test_rows_no_claim_covers_are_judged_against_base(tmp_path):
    """A table of modifications: each row against base, two-sided, in the report's family, in report.md/html and a csv,
    with a trajectory (dev cross-entropy at half the steps; BLEU only at the end) and diverged rows named; a sweep
    whose rows all belong to claims (the fixture above) has no such section."""
    mods = {
        "base": FIXTURE["base"],
        "rope": {1: (25.0, 4.0), 2: (26.0, 4.1), 3: (25.5, 4.05)},  # better on both readings
        "gelu": {1: (20.5, 5.0), 2: (21.5, 5.1), 3: (20.5, 5.0)},  # within noise
        "nopos": {1: (12.0, 7.0), 2: (13.0, 7.2)},  # worse
        "prenorm": {1: "diverged", 2: "diverged"},
    }
    sweep = make_sweep(tmp_path / "mods", mods)
    for trial in (sweep / "trials").iterdir():  # half-way evaluations: base and rope alike, so 1/2 is within noise
        result = json.loads((trial / "result.json").read_text()) if (trial / "result.json").exists() else {}
        if result.get("status") == "finished":
            seed = json.loads((trial / "trial.json").read_text())["seed"]
            half = {"kind": "eval", "step": 125, "steps": 250, "dev_ppl": 10.0 + 0.1 * seed}
            (trial / "metrics.jsonl").write_text(json.dumps(half) + "\n")
    out = write_report(sweep)
    md = (out / "report.md").read_text()
    assert "## Each row against base" in md
    assert ("- dev BLEU: better than base beyond seed noise: rope; worse than base beyond seed noise: nopos; "
            "within seed noise: gelu; diverged: prenorm.") in md  # fmt: skip
    vb = pd.read_csv(out / "versus-base.csv")
    ce = "dev cross-entropy (nats, ln PPL)"
    assert list(zip(vb["reading"], vb["row"])) == [
        (r, row) for r in ("dev BLEU", ce) for row in ("rope", "gelu", "nopos", "prenorm")
    ]
    got = {(r.row, r.reading): r for r in vb.itertuples()}
    assert got[("gelu", "dev BLEU")].outcome == "within noise"
    assert got[("rope", ce)].outcome == "better than base" and got[("nopos", ce)].outcome == "worse than base"
    assert got[("prenorm", ce)].outcome == "diverged" and "2 of 2 seeds diverged" in got[("prenorm", ce)].evidence
    assert got[("rope", ce)].trajectory == "1/2 within noise → 1 better" and got[("rope", ce)].unstable
    assert got[("rope", "dev BLEU")].trajectory == "1 better" and not got[("rope", "dev BLEU")].unstable
    # the printed interval (at 1 - alpha / looks) excludes 0 for the rows the report's family calls different
    for r in vb.itertuples():
        if r.outcome in ("better than base", "worse than base"):
            assert r.ci_low > 0 or r.ci_high < 0
    html_text = (out / "report.html").read_text()
    assert "Each row against base" in html_text and 'href="#row-rope"' in html_text
    plain = write_report(make_sweep(tmp_path / "table3"))
    assert "Each row against base" not in (plain / "report.md").read_text()
    assert not (plain / "versus-base.csv").exists()


def test_rows_against_base_without_replicates_are_not_judged(tmp_path):
    """One seed per row: no noise estimate, so the summary says not judged, never 'no row differs'."""
    one = {"base": {1: (20.0, 5.0)}, "rope": {1: (25.0, 4.0)}, "gelu": {1: (20.1, 5.0)}}
    md = (write_report(make_sweep(tmp_path / "one", one)) / "report.md").read_text()
    assert "- dev BLEU: not judged (no seed replicates): rope, gelu." in md
    assert "beyond seed noise" not in md.split("## Each row against base")[1].split("## ")[0].split("|")[0]
