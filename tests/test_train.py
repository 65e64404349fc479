import json
import random
import subprocess
import sys

import pytest
import torch

from transformer_core import train_and_evaluate
from transformer_core.device import cpu_bf16_speedup, resolve_precision
from transformer_core.errors import ConfigError
from transformer_core.run_config import make_run_config

TINY = dict(
    N=1,
    d_model=48,
    d_ff=96,
    h=4,
    d_k=12,
    d_v=12,
    P_drop=0.0,
    vocab=400,
    tokens_per_batch=512,
    warmup=10,
    eval_sentences=8,
    beam=2,
    max_extra=10,
    threads=1,
    log_every=5,
    average_last=2,
)


def run_config(data_dir, **kw):
    return make_run_config({**TINY, "data_dir": str(data_dir), **kw})


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
            **TINY,
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
    result = train_and_evaluate(run_config(fixture_data_dir, steps=20, eval_every=10), workdir)
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
    evals = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"eval"' in x]
    assert [e["step"] for e in evals] == [10, 20] and evals[0]["dev_sentences"] == 8 and evals[1]["dev_sentences"] == 45


def test_finished_run_is_not_trained_again(fixture_run, fixture_data_dir):
    workdir, result = fixture_run
    again = train_and_evaluate(run_config(fixture_data_dir, steps=20, eval_every=10), workdir)
    assert again == result


def test_workdir_of_another_config_is_refused(fixture_run, fixture_data_dir):
    workdir, _ = fixture_run
    with pytest.raises(ConfigError, match="another configuration"):
        train_and_evaluate(run_config(fixture_data_dir, steps=21, eval_every=10), workdir)


def _train_losses(workdir):
    return [json.loads(x)["loss"] for x in (workdir / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


def test_resume_after_interruption_matches_uninterrupted(fixture_corpus, fixture_data_dir, tmp_path):
    cfg = run_config(fixture_data_dir, steps=20, eval_every=10, P_drop=0.1)
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
    result = train_and_evaluate(run_config(fixture_data_dir, steps=20, eval_every=10, lr_scale=1e30), tmp_path)
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
        + [f"--set={k}={v}" for k, v in {**TINY, "steps": 20, "eval_every": 10, "lr_scale": 1e30}.items()],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3 and "diverged" in r.stdout and "Traceback" not in r.stderr


def test_precision_auto_follows_the_hardware(fixture_corpus, fixture_data_dir, tmp_path):
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) == "fp32"
    assert resolve_precision("bf16", cpu) == "bf16"
    assert resolve_precision("auto", cpu) == ("bf16" if cpu_bf16_speedup() > 1.1 else "fp32")
    with pytest.raises(ConfigError, match="precision='fp16'"):
        resolve_precision("fp16", cpu)
    result = train_and_evaluate(run_config(fixture_data_dir, steps=2, eval_every=2, precision="fp32"), tmp_path)
    assert result["precision"] == "fp32" and result["device"] == "cpu"


def test_cli_rejects_unknown_keys_and_bad_values(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "sweeps.cli", "train", "--workdir", str(tmp_path / "w"), *args],
            capture_output=True,
            text=True,
        )

    r = run("--set", "warmpu=10")
    assert r.returncode == 2 and "did you mean 'warmup'" in r.stderr and "valid keys are" in r.stderr
    r = run("--set", "P_drop=2")
    assert r.returncode == 2 and "P_drop=2.0 is invalid" in r.stderr
    r = run("--set", "steps=ten")
    assert r.returncode == 2 and "an integer" in r.stderr
    r = run("--profile", "laptop")
    assert r.returncode == 2 and "unknown profile 'laptop'" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "w").exists()
