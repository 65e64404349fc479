"""benchmarks/sweep_timeline.py: slots rebuilt from trial times, the start-up and the waits between trials."""

import json
import sys

import pytest

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from sweep_timeline import main, timeline  # noqa: E402


def _trial(sweep, name, starts, first_step, seconds, pid, bleu=1.0):
    """A finished trial; ``starts``: one per session (a resumed trial has several).  Its files are written now,
    far from these times, so its end is the last start plus ``seconds``."""
    d = sweep / "trials" / name
    d.mkdir(parents=True)
    (d / "sessions.jsonl").write_text("".join(json.dumps({"time": t, "node": "n", "pid": pid}) + "\n" for t in starts))
    (d / "attempts.jsonl").write_text("".join(json.dumps({"time": t + first_step}) + "\n" for t in starts))
    (d / "result.json").write_text(json.dumps({"session_seconds": seconds, "dev_bleu": bleu, "dev_ppl": 9.0}))


def test_slots_waits_start_up_and_the_first_trials_to_finish(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    # t1 0-100; t2 5-60; t3 70-150 after t2; t4 160-200: both slots free, it takes the one freed last (t3's, 150);
    # t5 resumed: its last session 210-250, after t4 (200).  A trial still running has no result: left out.
    for name, starts, first, seconds, pid in [("t1", [0], 8, 100, 1), ("t2", [5], 7, 55, 2), ("t3", [70], 1, 80, 2),
                                              ("t4", [160], 1, 40, 2), ("t5", [1, 210], 2, 40, 2)]:  # fmt: skip
        _trial(a, name, [1000 + s for s in starts], first, seconds, pid)
    (a / "trials" / "running").mkdir()
    t = timeline(a, None)
    assert (t["trials"], t["slots"], t["span"], t["processes"]) == (5, 2, 250, 2)
    assert t["waits"] == [10, 10, 10] and t["first_step"] == [8, 7, 1, 1, 2]
    assert timeline(a, 3)["span"] == 150  # t2, t1 and t3 finish first
    _trial(b, "t1", [0], 8, 100, 7, bleu=2.0)
    _trial(b, "t2", [5], 7, 55, 8)
    main([str(a), str(b)])
    assert "1 of 2 common trials with the same dev_bleu" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="has no trials/ folder"):
        main([str(tmp_path)])
