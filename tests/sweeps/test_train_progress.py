"""What `tsweep train` shows while it trains: the live view's fields, as a bar on a terminal, else as lines."""

import io
import json

from sweeps.cli import main
from sweeps.cli.train import ShowingTracker, TrainView
from sweeps.state.live import TrialState, trial_line
from transformer_core import rundir
from transformer_core.tracking import JsonTracker


def _step(view, step, loss=6.0, tokens=1000, seconds=1.0):
    view.step({"step": step, "steps": view.state.steps, "loss": loss, "lr": 1e-3, "tokens": tokens,
               "train_seconds": seconds, "dev_bleu": None, "evaluated": False})  # fmt: skip


def _window(view, step, loss, tok_s):
    view.metrics({"loss": loss, "nll": loss, "lr": 1e-3, "tokens_per_second": tok_s}, step)


def test_without_a_terminal_a_line_per_window_and_evaluation_not_per_step():
    out = io.StringIO()
    view = TrainView(10, log_every=5, out=out, tty=False)
    for step in range(1, 11):  # the trainer's order: the window's record, the evaluation, then progress
        if step % 5 == 0:
            _window(view, step, 5.0 - step / 10, 1234.0)
        if step == 10:
            view.metrics({"dev_ppl": 220.06, "dev_ce": 5.39, "dev_bleu": 0.08}, step)
        _step(view, step)
    view.metrics({"test_bleu": 0.05, "test_chrf": 1.0, "dev_chrf": 1.0, "test_ppl": 190.0}, 10)  # final scores
    view.status("FINISHED")
    view.close()
    lines = out.getvalue().splitlines()
    expected_window = TrialState("train", "train", "running", step=5, steps=10, loss=4.5, tokens_per_second=1234.0)
    assert lines[0].startswith("train     step 1/10  loss 6.000") and "a line every 5 steps" in lines[0]
    assert lines[1] == trial_line(expected_window) == "train     step 5/10  loss 4.500  dev BLEU -  PPL -  1,234 tok/s"
    assert lines[2].startswith("train     step 10/10  loss 4.000")
    assert lines[3] == "train: eval at step 10/10: dev BLEU 0.08, dev PPL 220.06"
    assert lines[4].startswith("train: step 10/10 done; final evaluation")
    assert len(lines) == 5  # nothing for the steps in between, nothing for the final scores


def test_a_language_model_shows_bits_per_byte():
    out = io.StringIO()
    view = TrainView(4, log_every=2, out=out, tty=False)
    _step(view, 1)
    view.metrics({"dev_ppl": 30.0, "dev_ce": 3.4, "dev_bpb": 1.234}, 2)
    _window(view, 2, 3.0, 500.0)
    lines = out.getvalue().splitlines()
    assert lines[1] == "train: eval at step 2/4: dev bits/byte 1.234, dev PPL 30.00"
    assert "bits/byte 1.234" in lines[2] and "BLEU" not in lines[2]


def test_on_a_terminal_a_bar_with_the_same_fields():
    out = io.StringIO()
    view = TrainView(20, log_every=5, out=out, tty=True)
    for step in range(1, 11):
        _step(view, step)
        if step == 5:
            _window(view, 5, 4.321, 2345.0)
    view.metrics({"dev_ppl": 99.5, "dev_ce": 4.6, "dev_bleu": 1.5}, 10)
    _step(view, 11)
    view.close()
    text = out.getvalue()
    assert "11/20" in text and "loss=4.321" in text and "tok/s=2,345" in text
    assert "dev BLEU=1.50" in text and "PPL=99.5" in text
    assert "train: eval at step 10/20: dev BLEU 1.50, dev PPL 99.50" in text  # written above the bar
    assert "train     step 5/20" not in text  # no plain window lines on a terminal


def test_the_tracker_writes_what_the_json_tracker_writes_and_survives_its_view(tmp_path):
    class Broken:
        def metrics(self, metrics, step):
            raise RuntimeError("a display bug")

        def status(self, status, reason=""):
            raise RuntimeError("a display bug")

    shown, plain = ShowingTracker(tmp_path / "a", Broken()), JsonTracker(tmp_path / "b" / rundir.TRACKING)
    assert not (tmp_path / "a").exists()  # nothing is created before the first call
    for tracker in (shown, plain):
        tracker.log_params({"N": 1})
        tracker.log_metrics({"loss": 1.0, "tokens_per_second": 2.0}, 5)
        tracker.log_artifact("dev.hyp")
        tracker.set_status("FINISHED")

    def records(path):
        return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in path.read_text().splitlines()]

    assert records(tmp_path / "a" / rundir.TRACKING) == records(tmp_path / "b" / rundir.TRACKING)
    assert len(records(tmp_path / "a" / rundir.TRACKING)) == 4


def test_tsweep_train_prints_progress_lines_when_not_on_a_terminal(tmp_path, fixture_data_dir, capsys):
    work = tmp_path / "run"
    argv = ["train", "--workdir", str(work), "--profile", "smoke", "--data-dir", str(fixture_data_dir),
            "--set", "steps=10", "log_every=5", "eval_every=10"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("train")]
    assert lines[0].startswith("train     step 1/10  loss ")
    assert lines[1].startswith("train     step 5/10  loss ") and lines[1].endswith(" tok/s")
    assert lines[2].startswith("train     step 10/10  loss ")
    evaluated = json.loads((work / rundir.RESULT).read_text())
    scores = f"dev BLEU {evaluated['dev_bleu']:.2f}, dev PPL {evaluated['dev_ppl']:.2f}"
    assert lines[3] == f"train: eval at step 10/10: {scores}"
    assert lines[4].startswith("train: step 10/10 done; final evaluation")
    assert captured.out.startswith("finished 10 steps")
    windows = [json.loads(x) for x in (work / rundir.METRICS).read_text().splitlines() if '"train"' in x]
    assert [w["step"] for w in windows] == [5, 10]
    assert f"loss {windows[0]['loss']:.3f}" in lines[1]  # the run's own window figures, as in a sweep's live view
    tracked = [json.loads(x) for x in (work / rundir.TRACKING).read_text().splitlines()]
    assert [r["kind"] for r in tracked][:2] == ["params", "metrics"] and tracked[-1]["status"] == "FINISHED"
    assert main([*argv, "--quiet"]) == 0  # finished: nothing trained again, nothing shown
    assert "train " not in capsys.readouterr().err
