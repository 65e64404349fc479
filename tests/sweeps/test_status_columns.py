"""`tsweep status` keeps its columns apart however long a search's trial ids, groups and rows are."""

import json

from sweeps.cli import main


def test_a_searchs_long_ids_do_not_run_into_the_next_column(tmp_path, capsys):
    tid, row = "sample-2f8c51d3-s1-0be3b4ef", "sample-2f8c51d3"  # the row shown is the label of the sampled values
    wd = tmp_path / "trials" / tid
    wd.mkdir(parents=True)
    record = {"id": tid, "group": "search", "row": row, "seed": 1, "values": {"steps": 20},
              "config_hash": "0be3b4ef0000", "search": {"P_drop": 0.2}}  # fmt: skip
    (wd / "trial.json").write_text(json.dumps(record))
    (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 1.0, "dev_ppl": 50.0, "steps": 20,
                                                "peak_rss_gb": 0.71}))  # fmt: skip
    (wd / "attempts.jsonl").write_text(json.dumps({"time": 1.0}) + "\n")
    state = {"name": "s", "profile": "smoke", "status": "finished", "metric": "dev_bleu", "mode": "max", "trials": [],
             "plan": {}}  # fmt: skip
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    capsys.readouterr()
    assert main(["status", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(tid))
    from analysis.samples import sample_label

    assert line.split()[:4] == [tid, "search", sample_label({"P_drop": 0.2}), "1"] and " 0.71 " in line
    assert out.splitlines()[0].split()[:4] == ["trial", "group", "row", "seed"]
