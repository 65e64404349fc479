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
    from analysis.data.samples import sample_label

    assert line.split()[:4] == [tid, "search", sample_label({"P_drop": 0.2}), "1"] and " 0.71 " in line
    assert out.splitlines()[0].split()[:4] == ["trial", "group", "row", "seed"]


def test_status_shows_the_knobs_the_rows_vary(tmp_path, capsys):
    """Issue 53: the knobs whose values differ between the trials are columns after the seed (Table 3's and beyond,
    as tsweep plan shows them); a knob a row leaves unset reads its default; a knob every row shares is no column."""
    rows = {"base": {"norm": "post", "P_drop": 0.1, "d_model": 32},
            "pre": {"norm": "pre", "P_drop": 0.1, "d_model": 32},
            "D1": {"norm": "post", "P_drop": 0.0, "d_model": 32, "lr_scale": 2.0}}  # fmt: skip
    for row, values in rows.items():
        tid = f"{row}-s1-0000abcd"
        wd = tmp_path / "trials" / tid
        wd.mkdir(parents=True)
        record = {"id": tid, "group": "base" if row == "base" else "N", "row": row, "seed": 1,
                  "values": {"steps": 20, **values}, "config_hash": "0000abcd0000"}  # fmt: skip
        (wd / "trial.json").write_text(json.dumps(record))
        (wd / "result.json").write_text(json.dumps({"status": "finished", "dev_bleu": 1.0, "dev_ppl": 50.0}))
    state = {"name": "own", "profile": "smoke", "trials": [f"{r}-s1-0000abcd" for r in rows], "plan": {}}
    (tmp_path / "sweep.json").write_text(json.dumps(state))
    capsys.readouterr()
    assert main(["status", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:7] == ["trial", "group", "row", "seed", "P_drop", "norm", "lr_scale"]
    assert "d_model" not in lines[0]
    shown = {x.split()[2]: x.split()[4:7] for x in lines[1:4]}
    assert shown == {"base": ["0.10", "post", "1"], "pre": ["0.10", "pre", "1"], "D1": ["0.00", "post", "2"]}
