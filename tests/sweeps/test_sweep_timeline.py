"""benchmarks/sweep_timeline.py: slots rebuilt from trial times, the start-up and the waits between trials."""

import json
import sys

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from sweep_timeline import main, timeline  # noqa: E402


def _trial(sweep, name, start, first_step, seconds, pid, bleu=1.0):
    d = sweep / "trials" / name
    d.mkdir(parents=True)
    (d / "sessions.jsonl").write_text(json.dumps({"time": start, "pid": pid}) + "\n")
    (d / "attempts.jsonl").write_text(json.dumps({"time": start + first_step}) + "\n")
    (d / "result.json").write_text(json.dumps({"session_seconds": seconds, "dev_bleu": bleu, "dev_ppl": 9.0}))


def test_two_slots_their_waits_and_the_first_trials_to_finish(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    # slot 1: 0-100, then 110-200; slot 2: 5-150, then 152-300 (a trial still running has no result: left out)
    for name, start, first, seconds, pid in [("t1", 0, 8, 100, 1), ("t2", 5, 7, 145, 2), ("t3", 110, 1, 90, 1),
                                             ("t4", 152, 1, 148, 2)]:  # fmt: skip
        _trial(a, name, 1000 + start, first, seconds, pid)
    (a / "trials" / "running").mkdir()
    t = timeline(a, None)
    assert (t["trials"], t["slots"], t["span"], t["processes"]) == (4, 2, 300, 2)
    assert sorted(t["waits"]) == [2, 10] and t["first_step"] == [8, 7, 1, 1]
    assert timeline(a, 3)["span"] == 200  # t1, t3, t2 finish first
    _trial(b, "t1", 0, 8, 100, 7, bleu=2.0)
    _trial(b, "t2", 5, 7, 145, 8)
    main([str(a), str(b)])
    assert "1 of 2 common trials with the same dev_bleu" in capsys.readouterr().out
