import errno
import json
import logging
import math
import os
import random
import subprocess
import sys

import pytest
import torch

from tests.helpers import ROOT, TINY_RUN, tiny_run_config
from transformer_core import rundir, train_and_evaluate, trainer
from transformer_core import train as train_module
from transformer_core.device import BF16_FLAGS, cpu_bf16_speedup, cpu_flags, resolve_precision
from transformer_core.errors import ConfigError, UserError
from transformer_core.optim import learning_rate
from transformer_core.run_config import make_run_config
from transformer_core.trainer import DIVERGENCE_MARGIN, DIVERGENCE_WINDOWS, DivergenceRule, is_eval_step


@pytest.mark.slow  # ~30 s; test_model's copy task and the fixture runs cover the same path by default
def test_copy_task_through_train_and_evaluate(tmp_path):
    """Sequences of letter-words mapped to their upper-case copies, learnt end to end."""
    rng = random.Random(0)
    words = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "we"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 7))) for _ in range(3000)]
    src, tgt = tmp_path / "train.src", tmp_path / "train.tgt"
    src.write_text("\n".join(lines) + "\n")
    tgt.write_text("\n".join(line.upper() for line in lines) + "\n")
    cfg = make_run_config(
        {
            **TINY_RUN,
            "corpus": f"files:{src},{tgt}",
            "vocab": 64,
            "data_dir": str(tmp_path / "d"),
            "N": 2,
            "d_model": 64,
            "d_ff": 128,
            "d_k": 16,
            "d_v": 16,
            "steps": 600,
            "eval_every": 600,
            "warmup": 60,
            "lr_scale": 0.5,
            "eps_ls": 0.0,
            "tokens_per_batch": 1024,
        }
    )
    result = train_and_evaluate(cfg, tmp_path / "run")
    assert result["status"] == "finished"
    assert result["test_bleu"] > 75 and result["dev_bleu"] > 75  # untrained: ~0


@pytest.fixture(scope="module")
def fixture_run(fixture_corpus, fixture_data_dir, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run")
    result = train_and_evaluate(tiny_run_config(fixture_data_dir, steps=20, eval_every=10), workdir)
    return workdir, result


def test_fixture_run_writes_every_file(fixture_run):
    workdir, result = fixture_run
    for name in ("config.json", "metrics.jsonl", "dev.hyp", "test.hyp", "result.json", "tracking.jsonl"):
        assert (workdir / name).is_file(), name
    assert len(list((workdir / "checkpoints").glob("step-*.pt"))) == 2
    assert result["status"] == "finished"
    for key in ("dev_bleu", "test_bleu", "dev_ppl", "test_ppl", "tokens_per_second", "train_flops"):
        assert isinstance(result[key], float) and result[key] == result[key] and result[key] < float("inf"), key
    assert result["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert result["train_flops"] == 6.0 * result["params"] * result["target_tokens"]
    assert result["averaged_checkpoints"] == [10, 20]
    assert len((workdir / "test.hyp").read_text().splitlines()) == 32
    on_disk = json.loads((workdir / "result.json").read_text())
    assert (
        on_disk["corpus_fingerprint"] == result["corpus_fingerprint"] and on_disk["torch_version"] == torch.__version__
    )
    evals = _records(workdir, "eval")
    assert [e["step"] for e in evals] == [10, 20] and evals[0]["dev_sentences"] == 8 and evals[1]["dev_sentences"] == 45
    for e in evals:
        assert set(e) == EVAL_KEYS and e["steps"] == 20 and isinstance(e["dev_bleu"], float)
        assert e["dev_ce"] == pytest.approx(math.log(e["dev_ppl"]))
    assert (result["schedule"], result["cooldown"], result["eval_bleu"]) == ("rsqrt", 0.2, "all")
    split = result["time_split"]
    assert set(split) == {"train", "data", "eval"} and 0 < result["eval_fraction"] < 1
    assert result["eval_fraction"] == pytest.approx(split["eval"] / sum(split.values()), abs=0.01)
    for path in rundir.checkpoints(workdir):  # plain containers and tensors only
        state = torch.load(path, weights_only=True)
        assert state["step"] in (10, 20) and state["stream"] == {"epoch": 0, "position": state["step"]}


def test_finished_run_is_not_trained_again(fixture_run, fixture_data_dir):
    workdir, result = fixture_run
    again = train_and_evaluate(tiny_run_config(fixture_data_dir, steps=20, eval_every=10), workdir)
    assert again == result


def test_workdir_of_another_config_is_refused(fixture_run, fixture_data_dir):
    workdir, _ = fixture_run
    with pytest.raises(ConfigError, match="another configuration"):
        train_and_evaluate(tiny_run_config(fixture_data_dir, steps=21, eval_every=10), workdir)


EVAL_KEYS = {"kind", "step", "steps", "dev_ppl", "dev_ce", "dev_bleu", "dev_sentences", "signature"}


def _records(workdir, kind):
    return [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines() if f'"{kind}"' in x]


def _train_losses(workdir):
    return [r["loss"] for r in _records(workdir, "train")]


def test_resume_after_interruption_matches_uninterrupted(fixture_corpus, fixture_data_dir, tmp_path):
    cfg = tiny_run_config(fixture_data_dir, steps=20, eval_every=10, P_drop=0.1)
    full = train_and_evaluate(cfg, tmp_path / "full")

    def interrupt(p):
        if p["step"] == 13:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_and_evaluate(cfg, tmp_path / "cut", progress=interrupt)
    assert not (tmp_path / "cut" / "result.json").exists()
    resumed = train_and_evaluate(cfg, tmp_path / "cut")
    assert resumed["target_tokens"] == full["target_tokens"]
    # the run logged steps 5, 10 before the cut (and 15 after it, twice for the cut run)
    assert _train_losses(tmp_path / "full")[-1] == _train_losses(tmp_path / "cut")[-1]
    assert resumed["dev_ppl"] == pytest.approx(full["dev_ppl"], rel=1e-6)


def test_divergence_is_a_result_not_a_crash(fixture_corpus, fixture_data_dir, tmp_path):
    result = train_and_evaluate(tiny_run_config(fixture_data_dir, steps=20, eval_every=10, lr_scale=1e30), tmp_path)
    assert result["status"] == "diverged" and 1 <= result["diverged_at"] <= 20
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "diverged"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeps.cli",
            "train",
            "--workdir",
            str(tmp_path),
            "--quiet",
            "--data-dir",
            str(fixture_data_dir),
        ]
        + [f"--set={k}={v}" for k, v in {**TINY_RUN, "steps": 20, "eval_every": 10, "lr_scale": 1e30}.items()],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3 and "diverged" in r.stdout and "Traceback" not in r.stderr


def test_precision_auto_follows_the_hardware(fixture_corpus, fixture_data_dir, tmp_path):
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) == "fp32"
    assert resolve_precision("bf16", cpu) == "bf16"
    native = cpu_flags() is None or bool(cpu_flags() & BF16_FLAGS)
    assert resolve_precision("auto", cpu) == ("bf16" if native and cpu_bf16_speedup() > 1.1 else "fp32")
    with pytest.raises(ConfigError, match="precision='fp16'"):
        resolve_precision("fp16", cpu)
    result = train_and_evaluate(tiny_run_config(fixture_data_dir, steps=2, eval_every=2, precision="fp32"), tmp_path)
    assert result["precision"] == "fp32" and result["device"] == "cpu"


def test_precision_auto_measures_bf16_only_where_the_cpu_has_bf16_instructions(monkeypatch):
    """A CPU whose flags list neither avx512_bf16 nor amx_bf16 emulates bf16 (two orders of magnitude slower on
    the AVX2 EPYC): auto takes fp32 there without the 2-second probe; with either flag, or with no flags to read
    (another system), the probe decides as before."""
    from transformer_core import device

    cpu, calls = torch.device("cpu"), []

    def probe(speedup: float):
        def measured():
            calls.append(speedup)
            return speedup

        return measured

    monkeypatch.setattr(device, "cpu_bf16_speedup", probe(2.0))
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert device.resolve_precision("auto", cpu) == "fp32" and calls == []
    for flags in (frozenset({"avx2", "avx512_bf16"}), frozenset({"amx_bf16"}), None):
        monkeypatch.setattr(device, "cpu_flags", lambda flags=flags: flags)
        assert device.resolve_precision("auto", cpu) == "bf16"
    assert calls == [2.0] * 3
    monkeypatch.setattr(device, "cpu_bf16_speedup", probe(0.5))
    assert device.resolve_precision("auto", cpu) == "fp32" and calls[-1] == 0.5
    monkeypatch.undo()
    flags = device.cpu_flags()  # this machine's own list, where it is x86 Linux
    assert flags is None or {"sse2"} <= flags


def test_eval_step_cadence():
    t = make_run_config({"steps": 25, "eval_every": 10}).train
    assert [s for s in range(1, 26) if is_eval_step(s, t)] == [10, 20, 25]


def test_eval_bleu_final_decodes_only_at_the_last_step(fixture_run, fixture_data_dir, tmp_path):
    _, full = fixture_run
    seen = []
    cfg = tiny_run_config(fixture_data_dir, steps=20, eval_every=10, eval_bleu="final")
    result = train_and_evaluate(cfg, tmp_path, progress=lambda p: seen.append(p) if p["evaluated"] else None)
    mid, last = _records(tmp_path, "eval")
    assert set(mid) == set(last) == EVAL_KEYS and (mid["step"], last["step"], mid["steps"]) == (10, 20, 20)
    assert mid["dev_bleu"] is None and mid["dev_sentences"] == 0 and mid["signature"] is None
    assert mid["dev_ce"] == pytest.approx(math.log(mid["dev_ppl"]))
    assert isinstance(last["dev_bleu"], float) and last["dev_sentences"] == 45
    assert [p["dev_bleu"] for p in seen] == [None, last["dev_bleu"]] and seen[0]["dev_ppl"] == mid["dev_ppl"]
    # the same training: only the intermediate decoding is skipped
    assert result["status"] == "finished" and result["eval_bleu"] == "final"
    assert result["dev_bleu"] == pytest.approx(full["dev_bleu"]) and result["test_bleu"] == pytest.approx(
        full["test_bleu"]
    )
    assert result["dev_ppl"] == pytest.approx(full["dev_ppl"], rel=1e-6)


def test_beam_stop_reaches_every_decode_of_a_run(fixture_data_dir, tmp_path, monkeypatch):
    """A run's beam_stop is what its dev and test decoding use (the real search, observed), and what
    result.json and a later tsweep translate/evaluate of the run use."""
    from transformer_core import decoding, evaluation
    from transformer_core.inference import load_trained

    seen = []

    def observed(*args, stop="exact", **kw):
        seen.append(stop)
        return decoding.beam_search(*args, stop=stop, **kw)

    monkeypatch.setattr(evaluation, "beam_search", observed)
    cfg = tiny_run_config(fixture_data_dir, steps=10, eval_every=10, eval_bleu="final", beam_stop="length")
    result = train_and_evaluate(cfg, tmp_path / "run")
    assert result["status"] == "finished" and result["beam_stop"] == "length"
    assert seen and set(seen) == {"length"}  # dev at the last step, then test
    seen.clear()
    tm = load_trained(tmp_path / "run", data_dir=fixture_data_dir)
    assert tm.translate(["in the beginning"]) and seen == ["length"]


def test_truncated_checkpoint_falls_back_to_the_previous_one(fixture_corpus, fixture_data_dir, tmp_path, caplog):
    cfg = tiny_run_config(fixture_data_dir, steps=20, eval_every=10, eval_bleu="final")  # step 10 holds dev_bleu None
    full = train_and_evaluate(cfg, tmp_path / "full")
    workdir = tmp_path / "cut"
    train_and_evaluate(cfg, workdir)
    (workdir / "result.json").unlink()
    newest = workdir / "checkpoints" / "step-20.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    with caplog.at_level(logging.WARNING, logger="transformer_core"):
        resumed = train_and_evaluate(cfg, workdir)
    assert "checkpoint step-20.pt unreadable (" in caplog.text and "resuming from step-10.pt" in caplog.text
    attempts = [json.loads(x) for x in (workdir / "attempts.jsonl").read_text().splitlines()]
    assert [a["from_step"] for a in attempts] == [0, 10]
    assert resumed["status"] == "finished" and resumed["averaged_checkpoints"] == [10, 20]
    assert resumed["target_tokens"] == full["target_tokens"]
    assert resumed["dev_ppl"] == pytest.approx(full["dev_ppl"], rel=1e-6)
    assert (workdir / "checkpoints" / "step-20.pt.unreadable").exists()
    # none readable: start again from scratch, with a warning
    (workdir / "result.json").unlink()
    for path in rundir.checkpoints(workdir):
        path.write_bytes(b"not a checkpoint")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="transformer_core"):
        again = train_and_evaluate(cfg, workdir)
    assert "no readable checkpoint left: starting from scratch" in caplog.text
    assert again["status"] == "finished" and again["target_tokens"] == full["target_tokens"]


def test_full_disk_is_a_one_line_user_error(fixture_corpus, fixture_data_dir, tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    target.write_text("old")

    def full(f):
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(UserError, match=r"no space left .* while writing x.json \(about 3.0 MB needed\)") as info:
        rundir.write_atomic(target, full, 3 * 1024 * 1024)
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]  # no temporary file left

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(train_module.torch, "save", no_space)
    with pytest.raises(UserError, match=r"checkpoints'.*while writing step-2.pt \(about [0-9.]+ KB needed\)"):
        train_and_evaluate(tiny_run_config(fixture_data_dir, steps=2, eval_every=2), tmp_path / "run")


def test_divergence_rule_counts_high_windows_after_warmup():
    rule = DivergenceRule(vocab_size=400, warmup=10)
    high = math.log(400) + DIVERGENCE_MARGIN + 0.1
    assert rule.update(0, 5, high) is None and rule.update(5, 10, high) is None  # warmup windows do not count
    assert rule.high == 0
    for end in range(15, 10 + 5 * DIVERGENCE_WINDOWS, 5):
        assert rule.update(end - 5, end, high) is None
    assert rule.update(20, 25, 5.0) is None and rule.high == 0  # a low window resets the count
    reasons = [rule.update(e - 5, e, high) for e in range(30, 30 + 5 * DIVERGENCE_WINDOWS, 5)]
    assert reasons[:-1] == [None] * (DIVERGENCE_WINDOWS - 1)
    assert "step 40" in reasons[-1] and f"above {math.log(400) + DIVERGENCE_MARGIN:.2f}" in reasons[-1]


def test_finite_but_exploding_loss_is_divergence(fixture_corpus, fixture_data_dir, tmp_path, monkeypatch):
    """lr_scale 25 on the tiny model: the loss climbs far above ln(V) without ever being NaN."""
    monkeypatch.setattr(trainer, "DIVERGENCE_FACTOR", 1e9)  # the rule after warmup alone (see test_warmup_divergence)
    result = train_and_evaluate(tiny_run_config(fixture_data_dir, steps=40, eval_every=40, lr_scale=25), tmp_path)
    losses = _train_losses(tmp_path)
    threshold = math.log(result["vocab_size"]) + DIVERGENCE_MARGIN
    assert all(math.isfinite(x) for x in losses) and losses[-1] > threshold
    assert result["status"] == "diverged" and result["diverged_at"] == 25  # windows 10-15, 15-20, 20-25
    assert "step 25" in result["reason"] and f"above {threshold:.2f}" in result["reason"]
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "diverged"


def test_schedule_drives_the_logged_rate(fixture_corpus, fixture_data_dir, tmp_path):
    cfg = tiny_run_config(fixture_data_dir, steps=10, eval_every=10, schedule="linear", warmup=4)
    result = train_and_evaluate(cfg, tmp_path)
    rates = {r["step"]: r["lr"] for r in _records(tmp_path, "train")}
    assert rates == {5: pytest.approx(learning_rate(5, 10, 48, 4, 1.0, "linear")), 10: 0.0}
    assert result["status"] == "finished" and result["schedule"] == "linear"


def test_translating_with_a_trained_model_does_not_import_torch_dynamo(fixture_data_dir, tmp_path):
    """`tsweep translate` and an evaluation's workers load a trained model and decode: no optimizer, so nothing
    needs torch._dynamo, whose import (torch.nn.attention.varlen pulls it in) is about 2 s on a 2-core machine.
    varlen is read when a CUDA packed step asks for it (segments.varlen_available)."""
    run = tmp_path / "run"
    assert train_and_evaluate(tiny_run_config(fixture_data_dir, steps=2, eval_every=2), run)["status"] == "finished"
    code = (
        "import json, sys\n"
        "from transformer_core.inference import load_trained\n"
        f"model = load_trained({str(run)!r}, data_dir={str(fixture_data_dir)!r})\n"
        "out = model.translate(['In the beginning God created the heaven and the earth.'])\n"
        "print(json.dumps({'lines': len(out), 'dynamo': 'torch._dynamo' in sys.modules}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"lines": 1, "dynamo": False}
