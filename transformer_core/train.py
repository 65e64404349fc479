"""train_and_evaluate: one configuration in, honest numbers out; resumable from its workdir.

Everything a run writes lies under ``workdir``:

    config.json          the RunConfig and its content hash
    metrics.jsonl        one line per training log interval and per evaluation
    checkpoints/         step-<n>.pt, the newest few (model, optimiser, data position, RNG)
    dev.hyp, test.hyp    detokenised beam-search output
    result.json          the summary (status finished or diverged)
    tracking.jsonl       the JSON tracker's log when no other tracker is given
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import time
from pathlib import Path
from typing import Callable, Optional

import torch

from .data import PAD, BatchStream, load_corpus
from .device import autocast, resolve_device, resolve_precision
from .distributed import barrier, sum_gradients, world
from .errors import ConfigError
from .evaluation import bleu, perplexity, translate
from .loss import label_smoothed_nll
from .model import build_model, count_parameters
from .optim import average_state_dicts, make_adam, paper_lr
from .run_config import RunConfig
from .tracking import JsonTracker, Tracker

log = logging.getLogger(__name__)
Progress = Callable[[dict], None]


def _write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    os.replace(tmp, path)


def _append(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _claim_workdir(config: RunConfig, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "config.json"
    if path.exists():
        old = json.loads(path.read_text()).get("hash")
        if old != config.content_hash():
            raise ConfigError(
                f"workdir {str(workdir)!r} holds a run of another configuration (hash {old}, "
                f"this one {config.content_hash()}): use a new workdir"
            )
    _write_json(path, {"hash": config.content_hash(), **config.to_dict()})


def _checkpoints(workdir: Path) -> list[Path]:
    return sorted((workdir / "checkpoints").glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))


def _save_checkpoint(workdir: Path, state: dict, keep: int) -> None:
    directory = workdir / "checkpoints"
    directory.mkdir(exist_ok=True)
    path = directory / f"step-{state['step']}.pt"
    torch.save(state, path.with_suffix(".tmp"))
    os.replace(path.with_suffix(".tmp"), path)
    for old in _checkpoints(workdir)[:-keep]:
        old.unlink()


class Trainer:
    """The loop's state; train_and_evaluate drives it."""

    def __init__(self, config: RunConfig, workdir: Path, tracker: Tracker, progress: Optional[Progress]):
        self.cfg, self.workdir, self.tracker, self.progress = config, workdir, tracker, progress
        t = config.train
        if t.threads:
            torch.set_num_threads(t.threads)
        self.device = resolve_device(t.device)
        self.precision = resolve_precision(t.precision, self.device)
        d = config.data
        self.corpus = load_corpus(d.corpus, d.vocab, d.data_dir, d.direction)
        self.train_split, self.dev = self.corpus.split("train"), self.corpus.split("dev")
        torch.manual_seed(t.seed)
        self.model = build_model(config.model, self.corpus.vocab_size, PAD).to(self.device)
        self.params = count_parameters(self.model)
        self.opt = make_adam(self.model.parameters(), (t.adam_beta1, t.adam_beta2), t.adam_eps)
        self.rank, self.world = world()
        if t.accumulate % self.world:
            raise ConfigError(
                f"accumulate={t.accumulate} is invalid with {self.world} workers: allowed a multiple of "
                "the worker count (the global batch is tokens_per_batch x accumulate)"
            )
        self.local_accumulate = t.accumulate // self.world
        self.stream = BatchStream(
            self.train_split, t.tokens_per_batch, t.seed, t.max_train_len, rank=self.rank, world_size=self.world
        )
        if self.world > 1:
            torch.manual_seed(t.seed * 1000 + self.rank)  # same initial weights, own dropout masks
        self.step, self.tokens = 0, 0
        self.seconds = {"train": 0.0, "data": 0.0, "eval": 0.0}
        self.last_eval: dict = {}

    # checkpoints ---------------------------------------------------------------
    def state(self) -> dict:
        return {
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "stream": self.stream.state(),
            "rng": torch.get_rng_state(),
            "tokens": self.tokens,
            "seconds": dict(self.seconds),
            "last_eval": self.last_eval,
        }

    def resume(self) -> bool:
        found = _checkpoints(self.workdir)
        if not found:
            return False
        state = torch.load(found[-1], map_location=self.device, weights_only=False)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.stream.restore(state["stream"])
        torch.set_rng_state(state["rng"])
        self.step, self.tokens = state["step"], state["tokens"]
        self.seconds, self.last_eval = state["seconds"], state["last_eval"]
        log.info("resumed %s from step %d", self.workdir, self.step)
        return True

    # one optimiser step ----------------------------------------------------------
    def train_step(self) -> tuple[float, float, int]:
        t = self.cfg.train
        self.model.train()
        loss_sum = nll_sum = 0.0
        ntok = 0
        for _ in range(self.local_accumulate):
            t0 = time.perf_counter()
            batch = next(self.stream)
            src, tgt_in, tgt_out = (
                x.to(self.device, non_blocking=True) for x in (batch.src, batch.tgt_in, batch.tgt_out)
            )
            t1 = time.perf_counter()
            self.seconds["data"] += t1 - t0
            mask = tgt_out != PAD
            with autocast(self.device, self.precision):
                hidden = self.model.features(src, tgt_in)
                logits = self.model.generator(hidden[mask])  # only real target positions: (n, V)
            loss, nll, n = label_smoothed_nll(logits, tgt_out[mask], t.eps_ls, PAD)
            loss.backward()
            loss_sum, nll_sum, ntok = loss_sum + float(loss.detach()), nll_sum + float(nll), ntok + int(n)
            self.seconds["train"] += time.perf_counter() - t1
        t1 = time.perf_counter()
        if self.world > 1:
            loss_sum, nll_sum, ntok = sum_gradients(list(self.model.parameters()), [loss_sum, nll_sum, ntok])
            ntok = int(round(ntok))
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.div_(max(ntok, 1))  # mean over every target token of the step (all workers)
        if t.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm)
        lr = paper_lr(self.step + 1, self.cfg.model.d_model, t.warmup, t.lr_scale)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.seconds["train"] += time.perf_counter() - t1
        self.step += 1
        self.tokens += ntok
        return loss_sum / max(ntok, 1), nll_sum / max(ntok, 1), ntok

    def evaluate(self, limit: int) -> dict:
        t0 = time.perf_counter()
        t = self.cfg.train
        ppl = perplexity(self.model, self.dev, self.device, self.precision)
        hyps = translate(
            self.model,
            self.dev,
            self.corpus.processor(),
            self.device,
            self.precision,
            t.beam,
            t.alpha,
            t.max_extra,
            limit,
        )
        score, signature = bleu(hyps, self.dev.tgt_text[: len(hyps)])
        self.seconds["eval"] += time.perf_counter() - t0
        return {"dev_ppl": ppl, "dev_bleu": score, "dev_sentences": len(hyps), "signature": signature, "hyps": hyps}


def _result_base(tr: Trainer, started: float) -> dict:
    import sacrebleu

    train_s = tr.seconds["train"] + tr.seconds["data"]
    return {
        "config_hash": tr.cfg.content_hash(),
        "steps": tr.step,
        "params": tr.params,
        "target_tokens": tr.tokens,
        "train_flops": 6.0 * tr.params * tr.tokens,
        "wall_seconds": round(tr.seconds["train"] + tr.seconds["data"] + tr.seconds["eval"], 2),
        "session_seconds": round(time.time() - started, 2),
        "time_split": {k: round(v, 2) for k, v in tr.seconds.items()},
        "tokens_per_second": round(tr.tokens / train_s, 1) if train_s else None,
        "seed": tr.cfg.train.seed,
        "device": str(tr.device),
        "precision": tr.precision,
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "sacrebleu_version": sacrebleu.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "corpus": tr.cfg.data.corpus,
        "corpus_fingerprint": tr.corpus.fingerprint,
        "vocab_size": tr.corpus.vocab_size,
    }


def train_and_evaluate(
    config: RunConfig, workdir, tracker: Optional[Tracker] = None, progress: Optional[Progress] = None
) -> dict:
    """Train ``config`` under ``workdir`` (resuming if it holds checkpoints) and evaluate it.

    Returns the result dict also written to ``workdir/result.json``.  A
    non-finite loss ends the run with status "diverged" (a result, not an error).
    """
    started = time.time()
    workdir = Path(workdir)
    rank, _ = world()
    if rank == 0:
        _claim_workdir(config, workdir)
    barrier()
    result_path = workdir / "result.json"
    if result_path.exists():
        done = json.loads(result_path.read_text())
        if done.get("config_hash") == config.content_hash() and done.get("status") in ("finished", "diverged"):
            return done
    tracker = tracker or JsonTracker(
        workdir / "tracking.jsonl" if rank == 0 else workdir / f"tracking.rank{rank}.jsonl"
    )
    tr = Trainer(config, workdir, tracker, progress)
    resumed = tr.resume()
    if rank:
        return _follow(tr)
    _append(
        workdir / "attempts.jsonl",
        {"time": time.time(), "host": platform.node(), "from_step": tr.step, "workers": tr.world},
    )
    if not resumed:
        tracker.log_params({**config.flat(), "params": tr.params, "config_hash": config.content_hash()})
    t = config.train
    metrics_path = workdir / "metrics.jsonl"
    window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "t0": time.perf_counter()}
    while tr.step < t.steps:
        loss, nll, ntok = tr.train_step()
        if not math.isfinite(loss):
            result = {
                **_result_base(tr, started),
                "status": "diverged",
                "diverged_at": tr.step,
                "reason": f"non-finite training loss at step {tr.step}",
            }
            _write_json(result_path, result)
            tracker.set_status("FAILED", result["reason"])
            return result
        window["loss"] += loss * ntok
        window["nll"] += nll * ntok
        window["tokens"] += ntok
        if tr.step % t.log_every == 0 or tr.step == t.steps:
            elapsed = time.perf_counter() - window["t0"]
            rec = {
                "kind": "train",
                "step": tr.step,
                "loss": window["loss"] / window["tokens"],
                "nll": window["nll"] / window["tokens"],
                "lr": tr.opt.param_groups[0]["lr"],
                "tokens_per_second": window["tokens"] / max(elapsed, 1e-9),
            }
            _append(metrics_path, rec)
            tracker.log_metrics({k: v for k, v in rec.items() if k not in ("kind", "step")}, tr.step)
            window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "t0": time.perf_counter()}
        if tr.step % t.eval_every == 0 or tr.step == t.steps:
            ev = tr.evaluate(0 if tr.step == t.steps else t.eval_sentences)
            tr.last_eval = {"step": tr.step, **{k: v for k, v in ev.items() if k != "hyps"}}
            _append(metrics_path, {"kind": "eval", **tr.last_eval})
            tracker.log_metrics({"dev_ppl": ev["dev_ppl"], "dev_bleu": ev["dev_bleu"]}, tr.step)
            (workdir / "dev.hyp").write_text("\n".join(ev["hyps"]) + "\n", encoding="utf-8")
            _save_checkpoint(workdir, tr.state(), keep=max(t.average_last, 1))
            barrier()
        if progress:
            progress(
                {
                    "step": tr.step,
                    "steps": t.steps,
                    "loss": loss,
                    "lr": tr.opt.param_groups[0]["lr"],
                    "tokens": tr.tokens,
                    "train_seconds": tr.seconds["train"] + tr.seconds["data"],
                    "dev_bleu": tr.last_eval.get("dev_bleu"),
                    "dev_ppl": tr.last_eval.get("dev_ppl"),
                    "evaluated": tr.last_eval.get("step") == tr.step,
                }
            )
    return _finish(tr, started, result_path)


def _follow(tr: Trainer) -> dict:
    """A worker of rank > 0: train in step with rank 0, which evaluates, checkpoints and reports."""
    t = tr.cfg.train
    while tr.step < t.steps:
        loss, _, _ = tr.train_step()
        if not math.isfinite(loss):
            return {"status": "diverged", "rank": tr.rank}
        if tr.step % t.eval_every == 0 or tr.step == t.steps:
            barrier()
    return {"status": "worker", "rank": tr.rank}


def _finish(tr: Trainer, started: float, result_path: Path) -> dict:
    """Test BLEU from the average of the last k checkpoints (the paper's practice)."""
    t, workdir = tr.cfg.train, tr.workdir
    t0 = time.perf_counter()
    paths = _checkpoints(workdir)[-t.average_last :]
    states = [torch.load(p, map_location=tr.device, weights_only=False)["model"] for p in paths]
    final_state = tr.model.state_dict()
    tr.model.load_state_dict(average_state_dicts(states))
    test = tr.corpus.split("test")
    hyps = translate(tr.model, test, tr.corpus.processor(), tr.device, tr.precision, t.beam, t.alpha, t.max_extra)
    test_bleu, signature = bleu(hyps, test.tgt_text)
    test_ppl = perplexity(tr.model, test, tr.device, tr.precision)
    tr.model.load_state_dict(final_state)
    (workdir / "test.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (workdir / "test.ref").write_text("\n".join(test.tgt_text) + "\n", encoding="utf-8")
    (workdir / "dev.ref").write_text("\n".join(tr.dev.tgt_text) + "\n", encoding="utf-8")
    tr.seconds["eval"] += time.perf_counter() - t0
    ev = tr.last_eval
    result = {
        **_result_base(tr, started),
        "status": "finished",
        "dev_bleu": ev["dev_bleu"],
        "dev_ppl": ev["dev_ppl"],
        "test_bleu": test_bleu,
        "test_ppl": test_ppl,
        "averaged_checkpoints": [int(p.stem.split("-")[1]) for p in paths],
        "sacrebleu_signature": signature,
    }
    _write_json(result_path, result)
    tr.tracker.log_metrics({"test_bleu": test_bleu, "test_ppl": test_ppl}, tr.step)
    for name in ("result.json", "dev.hyp", "test.hyp", "config.json", "metrics.jsonl"):
        tr.tracker.log_artifact(str(workdir / name))
    tr.tracker.set_status("FINISHED")
    return result
