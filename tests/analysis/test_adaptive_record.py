"""sweep.json's adaptive record (analysis.data.adaptive_record): its stop is a StopReason the verdicts and the report
decide on; an older record (its stop in a sentence) is migrated in one place to the same decisions; no decision
elsewhere reads the sentence."""

import ast
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.data.adaptive_record import VERSION, AdaptiveRecord, StopReason, migrate_stop, read_adaptive, record_stop
from analysis.report.model import budget_lines, build, problems
from analysis.report.writers import write_report
from analysis.stats.rule import charged_looks, sweep_rule
from tests.analysis.test_analysis import make_sweep
from tests.helpers import ROOT
from transformer_core.errors import UserError

SPENT = "wall-clock budget (60 min) spent during the minimum seeds: 4 of 38 trials finished; the rest are not in the "
SPENT += "table (their rows are incomplete); a larger --budget with --resume goes on; D-dropout-helps needs --budget 2h"
BEFORE = "wall-clock budget (1 min) spent before the minimum seeds were complete: 0 of 4 trials finished"
ROUND = "wall-clock budget (60 min) would be exceeded by the next round"
BASE = {"min": 2, "max": 4, "looks": 3, "rounds": [], "spent_seconds": 12.5, "unreached": {"X-open": "2h"}}

# (the reason, its sentence, the old record's "stop" where a version-1 record had one, looks charged with no round)
CASES = [
    (StopReason.BUDGET_SPENT, SPENT, "budget", 1),
    (StopReason.BUDGET_SPENT, BEFORE, "budget", 1),
    (StopReason.BUDGET, ROUND, "budget", 3),
    (StopReason.DATA, "every claim decided, or no undecided comparison that one more seed could decide", "data", 3),
    (StopReason.DATA, "no undecided comparison that one more seed could decide: 1 undecided (D-dropout-helps "
     "(dev_bleu): D1 vs base) would stay within noise at 4 seeds a row, or their rows have them", "data", 3),
    (StopReason.MAX, "max seeds (4) reached", "max", 3),
    (StopReason.INTERRUPTED, "interrupted by SIGINT during the minimum seeds: 1 of 4 trials finished; --resume goes on",
     "interrupted", 1),
    (StopReason.NOT_RECORDED, "not recorded: the session started 2026-11-30 10:00 did not close", None, 3),
    (StopReason.FAILED, "failed: RuntimeError: CUDA error", None, 3),
]  # fmt: skip


def new_record(reason: StopReason, sentence: str, rounds: list | None = None) -> dict:
    """The record as sweeps.run.adaptive writes it now."""
    ad = {**BASE, "rounds": rounds or []}
    record_stop(ad, reason, sentence)
    return ad


def old_records(sentence: str, stop: str | None, rounds: list | None = None) -> list[dict]:
    """The records an older sweeps.run.adaptive wrote for the same stop: with its "stop" key (version 1) and, where
    that had one, from before it (the sentence only)."""
    v1 = {**BASE, "rounds": rounds or [], "stopped": sentence, **({"stop": stop} if stop else {})}
    return [v1, {k: v for k, v in v1.items() if k != "stop"}] if stop else [v1]


@pytest.mark.parametrize("reason,sentence,stop,looks", CASES, ids=[f"{c[0].value}-{i}" for i, c in enumerate(CASES)])
def test_an_old_record_is_migrated_to_the_stop_a_new_one_records(reason, sentence, stop, looks):
    new = new_record(reason, sentence)
    assert new["version"] == VERSION and new["stop"] == reason.value and new["stopped"] == sentence
    assert read_adaptive(new).stop is reason and charged_looks(new) == looks
    for old in old_records(sentence, stop):
        assert "version" not in old and migrate_stop(old) is reason
        assert read_adaptive(old) == read_adaptive(new)  # the same typed record, so the same decisions
        assert charged_looks(old) == charged_looks(new) == looks
        assert sweep_rule(old) == sweep_rule(new) and sweep_rule(old, evidence="e").looks == 1
    rounds = [{"round": 1, "added": {"D1": "D-dropout-helps: dev_bleu"}, "started": 1.0}]
    for old in old_records(sentence, stop, rounds):  # once the loop has looked: every planned look, however stopped
        assert charged_looks(old) == charged_looks(new_record(reason, sentence, rounds)) == 3


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build(make_sweep(tmp_path_factory.mktemp("adaptive-record")), samples=20)


@pytest.mark.parametrize("reason,sentence,stop,looks", CASES, ids=[f"{c[0].value}-{i}" for i, c in enumerate(CASES)])
def test_an_old_record_and_a_new_one_give_the_same_report_lines(model, reason, sentence, stop, looks):
    """The header's adaptive lines (looks charged, the stop as written, the claims not reached) and the reason
    given to a trial the budget stopped are the same for a new record and its older forms."""
    stopped = pd.DataFrame({"trial_id": ["t1"], "row": ["base"], "seed": [3], "status": ["stopped"], "reason": [None]})

    def lines(ad: dict) -> tuple[list[str], list]:
        h = {**model.header, "adaptive": ad}
        drawn = budget_lines(h, model.header_noise, model.regime, model.pairing, sweep_rule(ad), frozenset())
        return drawn, list(problems(stopped, h)["reason"])

    new, (lines_new, why_new) = new_record(reason, sentence), lines(new_record(reason, sentence))
    assert f"Looks charged: {looks} " in "\n".join(lines_new) and f"stopped: {sentence}. " in "\n".join(lines_new)
    assert why_new == (["the wall-clock budget was spent before it finished"] if looks == 1 and stop == "budget"
                       else [""])  # fmt: skip
    for old in old_records(sentence, stop):
        assert lines(old) == (lines_new, why_new)
    assert lines(read_adaptive(new)) == (lines_new, why_new)  # the typed record, as the report's header holds it


def test_a_report_of_an_old_record_is_the_report_of_a_new_one(tmp_path):
    """Every file the report writes, byte for byte, for a sweep whose budget ran out during the minimum seeds,
    recorded now and by the two older versions."""
    src = make_sweep(tmp_path / "src")
    records = {"new": new_record(StopReason.BUDGET_SPENT, SPENT)}
    records.update(zip(("v1", "sentence"), old_records(SPENT, "budget")))
    files = {}
    for name, ad in records.items():
        sweep = tmp_path / name
        shutil.copytree(src, sweep)
        state = json.loads((sweep / "sweep.json").read_text())
        (sweep / "sweep.json").write_text(json.dumps({**state, "adaptive": ad}))
        out = write_report(sweep, tmp_path / f"report-{name}", samples=20)
        files[name] = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
    assert "report.md" in files["new"] and b"Looks charged: 1 " in files["new"]["report.md"]
    assert files["v1"] == files["new"] and files["sentence"] == files["new"]


def test_a_sentence_no_version_knows_is_refused_in_one_line():
    with pytest.raises(UserError) as err:
        read_adaptive({**BASE, "stopped": "the operator went home"}, "'/sweeps/x'")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("sweep.json in '/sweeps/x': its adaptive record's stop ")
    assert "'the operator went home'" in msg and '"stop" (one of data, max, budget, budget_spent, ' in msg
    for bad, needle in (({"stop": "bored"}, "stop 'bored' is none of data, max"),
                        ({"version": VERSION, "stop": "bored"}, "stop 'bored' is none of data, max"),
                        ({"version": 9}, "of version 9, written by a newer tsweep")):  # fmt: skip
        with pytest.raises(UserError, match=needle) as err:
            read_adaptive({**BASE, **bad})
        assert "\n" not in str(err.value)
    assert read_adaptive({**BASE}) == AdaptiveRecord(2, 4, 3, "p", (), 12.5, None, None, {"X-open": "2h"})
    assert read_adaptive(None) is None and read_adaptive({}) is None and charged_looks({}) == 1


# -------------------------------------------------------------------------------- no decision reads the sentence

# the modules whose decisions read the adaptive record; adaptive_record.py's migration is the one reader of prose
DECIDERS = sorted((ROOT / "analysis").rglob("*.py")) + sorted((ROOT / "sweeps").rglob("*.py"))
TEXT_TESTS = {"startswith", "endswith", "find", "rfind", "index", "count", "search", "match", "fullmatch", "split"}


def _is_sentence(node: ast.AST) -> bool:
    """Whether an expression reads the ``stopped`` sentence: ``x["stopped"]``, ``x.get("stopped")``, ``x.stopped``
    or a name ``stopped``, wherever it sits in the expression (``str(...)``, ``... or ""``)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == "stopped" or isinstance(n, ast.Attribute) and n.attr == "stopped":
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == "stopped":
            return True
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args
                and isinstance(n.args[0], ast.Constant) and n.args[0].value == "stopped"):  # fmt: skip
            return True
    return False


def sentence_tests(source: str) -> list[int]:
    """The lines of ``source`` that test the stop sentence's text: ``"..." in <sentence>``, ``<sentence> == "..."``
    or ``<sentence>.startswith(...)`` and the like (re.search(..., <sentence>) included)."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)) for op in n.ops):
            if any(_is_sentence(c) for c in n.comparators) or (
                any(isinstance(op, (ast.Eq, ast.NotEq)) for op in n.ops) and _is_sentence(n.left)
            ):
                out.append(n.lineno)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in TEXT_TESTS:
            if _is_sentence(n.func.value) or any(_is_sentence(a) for a in n.args):
                out.append(n.lineno)
    return out


def test_the_sentence_test_finds_the_old_decisions():
    """The scan below would have found the substring checks the stop reason replaced."""
    old = [
        'if adaptive.get("stop") == "budget" and "minimum seeds" in str(adaptive.get("stopped", "")):\n    pass',
        'stopped = (h.get("adaptive") or {}).get("stopped") or ""\n'
        'why = "x" if "budget" in stopped and "spent" in stopped else ""',
        'x = ad["stopped"].startswith("interrupted")',
        'x = re.search("spent", record.stopped)',
    ]
    assert [len(sentence_tests(src)) for src in old] == [1, 2, 1, 1]
    assert sentence_tests('x = ad.stop is StopReason.BUDGET_SPENT\ny = f"stopped: {ad.stopped}"') == []


@pytest.mark.parametrize("path", [p for p in DECIDERS if p.name != "adaptive_record.py"], ids=lambda p: p.stem)
def test_no_verdict_or_report_decision_reads_the_stop_sentence(path: Path):
    assert sentence_tests(path.read_text()) == [], f"{path.relative_to(ROOT)} tests the stop sentence's text"


def test_the_migration_is_the_one_place_that_reads_the_sentence():
    # it does read it, and only it
    assert sentence_tests((ROOT / "analysis" / "data" / "adaptive_record.py").read_text())
