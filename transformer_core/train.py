"""train_and_evaluate: one configuration in, honest numbers out; resumable from its workdir.

Everything a run writes lies under ``workdir`` (the names are rundir's):

    config.json          the RunConfig and its content hash
    metrics.jsonl        one line per training log interval and per evaluation
    attempts.jsonl       one line per start or resumption
    checkpoints/         step-<n>.pt, the newest few (model, optimiser, data position, RNG)
    dev.hyp, test.hyp    detokenised beam-search output
    result.json          the summary (status finished or diverged)
    tracking.jsonl       the JSON tracker's log when no other tracker is given

Checkpoints hold only tensors and plain containers and load with ``weights_only=True``; an
unreadable one (a truncated file) is set aside and the next newest one is used.
"""

from __future__ import annotations

import json
import logging
import math
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

from . import rundir
from .data import PAD, BatchStream, load_corpus
from .device import autocast, resolve_device, resolve_precision
from .distributed import barrier, sum_gradients, world
from .errors import ConfigError
from .evaluation import bleu, chrf, perplexity, translate
from .loss import label_smoothed_nll
from .model import build_model, count_parameters
from .optim import average_state_dicts, learning_rate, make_adam
from .run_config import RunConfig, TrainConfig
from .rundir import Status
from .tracking import JsonTracker, Tracker

log = logging.getLogger(__name__)
Progress = Callable[[dict], None]

DIVERGENCE_MARGIN = 2.0
"""Nats above ln(vocab_size) (the loss of a uniform guess) beyond which a logging window's
training loss counts as diverging: a model that learns anything is below ln(vocab_size)
after warmup."""

DIVERGENCE_WINDOWS = 3
"""Consecutive diverging logging windows (each wholly after warmup) that end a run as "diverged"."""


def is_eval_step(step: int, t: TrainConfig) -> bool:
    """Whether optimiser step ``step`` ends with an evaluation and a checkpoint: every eval_every and the last."""
    return step % t.eval_every == 0 or step == t.steps


def is_log_step(step: int, t: TrainConfig) -> bool:
    """Whether optimiser step ``step`` closes a logging window: every log_every and the last."""
    return step % t.log_every == 0 or step == t.steps


def _claim_workdir(config: RunConfig, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / rundir.CONFIG
    trained = any((workdir / name).exists() for name in (rundir.METRICS, rundir.RESULT, rundir.CHECKPOINTS))
    if path.exists() and trained:  # a config.json alone (a run that failed before training) is replaced
        try:
            old = json.loads(path.read_text()).get("hash")
        except (OSError, ValueError):
            old = "unreadable"
        if old != config.content_hash():
            raise ConfigError(
                f"workdir {str(workdir)!r} holds a run of another configuration (hash {old}, "
                f"this one {config.content_hash()}): use a new workdir"
            )
    rundir.write_json(path, {"hash": config.content_hash(), **config.to_dict()})


def _nbytes(obj) -> int:
    """Roughly what torch.save writes for ``obj``: its tensors' bytes."""
    if isinstance(obj, torch.Tensor):
        return obj.nelement() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 8


def _save_checkpoint(workdir: Path, state: dict, keep: int) -> None:
    directory = workdir / rundir.CHECKPOINTS
    directory.mkdir(exist_ok=True)
    path = directory / rundir.checkpoint_name(state["step"])
    rundir.write_atomic(path, lambda f: torch.save(state, f), _nbytes(state))
    for old in rundir.checkpoints(workdir)[:-keep]:
        old.unlink()


_CHECKPOINT_KEYS = ("step", "model", "optimizer", "stream", "rng", "tokens", "seconds", "last_eval")


def _load_checkpoint(path: Path) -> dict:
    state = torch.load(path, map_location="cpu", weights_only=True)
    missing = [k for k in _CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"not a checkpoint: no {', '.join(missing)}")
    return state


class DivergenceRule:
    """Diverged: the training loss of DIVERGENCE_WINDOWS logging windows in a row, each wholly after
    warmup, above ln(vocab_size) + DIVERGENCE_MARGIN.  ``high`` (the current run) survives a resume."""

    def __init__(self, vocab_size: int, warmup: int, high: int = 0):
        self.vocab_size, self.warmup, self.high = vocab_size, warmup, high
        self.threshold = math.log(vocab_size) + DIVERGENCE_MARGIN

    def update(self, start: int, end: int, loss: float) -> Optional[str]:
        """One window, steps start+1 .. end, and its loss; the reason when the run has diverged."""
        if start < self.warmup:
            return None
        self.high = self.high + 1 if loss > self.threshold else 0
        if self.high < DIVERGENCE_WINDOWS:
            return None
        return (
            f"training loss {loss:.2f} above {self.threshold:.2f} (ln {self.vocab_size} + {DIVERGENCE_MARGIN:g}, "
            f"a uniform guess plus a margin) in {self.high} logging windows in a row, up to step {end}"
        )


@dataclass
class _Window:
    """Token-weighted training loss of the steps after ``start`` until the next log step."""

    start: int
    loss: float = 0.0
    nll: float = 0.0
    tokens: int = 0
    t0: float = field(default_factory=time.perf_counter)


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
        self.divergence = DivergenceRule(self.corpus.vocab_size, t.warmup)
        self.window = _Window(0)

    # checkpoints ---------------------------------------------------------------
    def state(self) -> dict:
        """Tensors and plain containers only: loadable with weights_only=True."""
        return {
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "stream": {k: int(v) for k, v in self.stream.state().items()},
            "rng": torch.get_rng_state(),
            "tokens": int(self.tokens),
            "seconds": {k: float(v) for k, v in self.seconds.items()},
            "last_eval": dict(self.last_eval),
            "high_loss_windows": self.divergence.high,
        }

    def resume(self) -> bool:
        state = rundir.newest_checkpoint(self.workdir, _load_checkpoint)
        if state is None:
            return False
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.stream.restore(state["stream"])
        torch.set_rng_state(state["rng"])
        self.step, self.tokens = state["step"], state["tokens"]
        self.seconds, self.last_eval = state["seconds"], state["last_eval"]
        self.divergence.high = state.get("high_loss_windows", 0)
        self.window = _Window(self.step)
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
        lr = learning_rate(self.step + 1, t.steps, self.cfg.model.d_model, t.warmup, t.lr_scale, t.schedule, t.cooldown)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.seconds["train"] += time.perf_counter() - t1
        self.step += 1
        self.tokens += ntok
        return loss_sum / max(ntok, 1), nll_sum / max(ntok, 1), ntok

    def advance(self) -> tuple[float, Optional[dict], Optional[str]]:
        """One optimiser step: its loss, the train record when it closes a logging window, and why the run
        has diverged if it has.  Every worker sees the same (summed) losses, so all decide alike."""
        loss, nll, ntok = self.train_step()
        if not math.isfinite(loss):
            return loss, None, f"non-finite training loss at step {self.step}"
        w = self.window
        w.loss, w.nll, w.tokens = w.loss + loss * ntok, w.nll + nll * ntok, w.tokens + ntok
        if not is_log_step(self.step, self.cfg.train):
            return loss, None, None
        self.window = _Window(self.step)
        rec = {
            "kind": "train",
            "step": self.step,
            "loss": w.loss / max(w.tokens, 1),
            "nll": w.nll / max(w.tokens, 1),
            "lr": self.opt.param_groups[0]["lr"],
            "tokens_per_second": w.tokens / max(time.perf_counter() - w.t0, 1e-9),
        }
        return loss, rec, self.divergence.update(w.start, self.step, rec["loss"])

    def evaluate(self) -> tuple[dict, Optional[list[str]]]:
        """Dev perplexity over the whole dev set; beam-search BLEU too at the last step, and at every
        evaluation with eval_bleu "all" (on the first eval_sentences sentences)."""
        t0 = time.perf_counter()
        t = self.cfg.train
        ppl = perplexity(self.model, self.dev, self.device, self.precision)
        ev = {"step": self.step, "steps": t.steps, "dev_ppl": ppl, "dev_ce": math.log(ppl)}
        ev.update(dev_bleu=None, dev_sentences=0, signature=None)
        hyps = None
        last = self.step == t.steps
        if last or t.eval_bleu == "all":
            hyps = translate(
                self.model,
                self.dev,
                self.corpus.processor(),
                self.device,
                self.precision,
                t.beam,
                t.alpha,
                t.max_extra,
                0 if last else t.eval_sentences,
            )
            score, signature = bleu(hyps, self.dev.tgt_text[: len(hyps)])
            ev.update(dev_bleu=score, dev_sentences=len(hyps), signature=signature)
        self.seconds["eval"] += time.perf_counter() - t0
        return ev, hyps


def _result_base(tr: Trainer, started: float) -> dict:
    import sacrebleu

    t, s = tr.cfg.train, tr.seconds
    train_s, total_s = s["train"] + s["data"], s["train"] + s["data"] + s["eval"]
    return {
        "config_hash": tr.cfg.content_hash(),
        "steps": tr.step,
        "params": tr.params,
        "target_tokens": tr.tokens,
        "train_flops": 6.0 * tr.params * tr.tokens,
        "wall_seconds": round(total_s, 2),
        "session_seconds": round(time.time() - started, 2),
        "time_split": {k: round(v, 2) for k, v in s.items()},
        "eval_fraction": round(s["eval"] / total_s, 4) if total_s else None,
        "tokens_per_second": round(tr.tokens / train_s, 1) if train_s else None,
        "schedule": t.schedule,
        "cooldown": t.cooldown,
        "eval_bleu": t.eval_bleu,
        "seed": t.seed,
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


def _finished_result(config: RunConfig, path: Path) -> Optional[dict]:
    """The result.json of an earlier session that finished or diverged with this configuration."""
    if not path.exists():
        return None
    try:
        done = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("%s unreadable (%s): running again", path, exc)
        return None
    if done.get("config_hash") == config.content_hash() and done.get("status") in rundir.DONE:
        return done
    return None


def train_and_evaluate(
    config: RunConfig, workdir, tracker: Optional[Tracker] = None, progress: Optional[Progress] = None
) -> dict:
    """Train ``config`` under ``workdir`` (resuming if it holds checkpoints) and evaluate it.

    Returns the result dict also written to ``workdir/result.json``.  A non-finite training loss,
    or one far above a uniform guess for several logging windows (DivergenceRule), ends the run with
    status "diverged" (a result, not an error).
    """
    started = time.time()
    workdir = Path(workdir)
    rank, _ = world()
    if rank == 0:
        _claim_workdir(config, workdir)
    barrier()
    result_path = workdir / rundir.RESULT
    done = _finished_result(config, result_path)
    if done:
        return done
    tracker = tracker or JsonTracker(workdir / rundir.TRACKING if rank == 0 else workdir / f"tracking.rank{rank}.jsonl")
    tr = Trainer(config, workdir, tracker, progress)
    resumed = tr.resume()
    if rank:
        return _follow(tr)
    rundir.append_json(
        workdir / rundir.ATTEMPTS,
        {"time": time.time(), "host": platform.node(), "from_step": tr.step, "workers": tr.world},
    )
    if not resumed:
        tracker.log_params({**config.flat(), "params": tr.params, "config_hash": config.content_hash()})
    t = config.train
    while tr.step < t.steps:
        loss, rec, diverged = tr.advance()
        if rec:
            rundir.append_json(workdir / rundir.METRICS, rec)
            tracker.log_metrics({k: v for k, v in rec.items() if k not in ("kind", "step")}, tr.step)
        if diverged:
            return _diverged(tr, started, result_path, diverged)
        if is_eval_step(tr.step, t):
            _evaluate_and_checkpoint(tr)
        if progress:
            progress(
                {
                    "step": tr.step,
                    "steps": t.steps,
                    "loss": loss,
                    "lr": tr.opt.param_groups[0]["lr"],
                    "tokens": tr.tokens,
                    "train_seconds": tr.seconds["train"] + tr.seconds["data"],
                    "dev_bleu": tr.last_eval.get("dev_bleu"),  # None before the first BLEU (eval_bleu "final")
                    "dev_ppl": tr.last_eval.get("dev_ppl"),
                    "dev_ce": tr.last_eval.get("dev_ce"),
                    "evaluated": tr.last_eval.get("step") == tr.step,
                }
            )
    return _finish(tr, started, result_path)


def _evaluate_and_checkpoint(tr: Trainer) -> None:
    """Rank 0 at an eval step: evaluate, log, write dev.hyp and a checkpoint; then meet the other workers."""
    ev, hyps = tr.evaluate()
    tr.last_eval = ev
    rundir.append_json(tr.workdir / rundir.METRICS, {"kind": "eval", **ev})
    scores = {k: ev[k] for k in ("dev_ppl", "dev_ce", "dev_bleu") if ev[k] is not None}
    tr.tracker.log_metrics(scores, tr.step)
    if hyps is not None:
        rundir.write_lines(tr.workdir / rundir.DEV_HYP, hyps)
    _save_checkpoint(tr.workdir, tr.state(), keep=max(tr.cfg.train.average_last, 1))
    barrier()


def _diverged(tr: Trainer, started: float, result_path: Path, reason: str) -> dict:
    result = {**_result_base(tr, started), "status": Status.DIVERGED.value, "diverged_at": tr.step, "reason": reason}
    rundir.write_json(result_path, result)
    log.warning("%s diverged: %s", tr.workdir, reason)
    tr.tracker.set_status("FAILED", reason)
    return result


def _follow(tr: Trainer) -> dict:
    """A worker of rank > 0: train in step with rank 0, which evaluates, checkpoints and reports."""
    t = tr.cfg.train
    while tr.step < t.steps:
        _, _, diverged = tr.advance()
        if diverged:
            return {"status": Status.DIVERGED.value, "rank": tr.rank}
        if is_eval_step(tr.step, t):
            barrier()
    return {"status": Status.WORKER.value, "rank": tr.rank}


def _finish(tr: Trainer, started: float, result_path: Path) -> dict:
    """Test BLEU from the average of the last k checkpoints (the paper's practice)."""
    t, workdir = tr.cfg.train, tr.workdir
    t0 = time.perf_counter()
    paths = rundir.checkpoints(workdir)[-t.average_last :]
    states = [_load_checkpoint(p)["model"] for p in paths]
    final_state = tr.model.state_dict()
    tr.model.load_state_dict(average_state_dicts(states))
    test = tr.corpus.split("test")
    hyps = translate(tr.model, test, tr.corpus.processor(), tr.device, tr.precision, t.beam, t.alpha, t.max_extra)
    test_bleu, signature = bleu(hyps, test.tgt_text)
    test_chrf, chrf_signature = chrf(hyps, test.tgt_text)
    dev_hyps = (workdir / rundir.DEV_HYP).read_text(encoding="utf-8").split("\n")[:-1]  # the final model's, as written
    dev_chrf = chrf(dev_hyps, tr.dev.tgt_text)[0]
    test_ppl = perplexity(tr.model, test, tr.device, tr.precision)
    tr.model.load_state_dict(final_state)
    rundir.write_lines(workdir / rundir.TEST_HYP, hyps)
    rundir.write_lines(workdir / rundir.TEST_REF, test.tgt_text)
    rundir.write_lines(workdir / rundir.DEV_REF, tr.dev.tgt_text)
    tr.seconds["eval"] += time.perf_counter() - t0
    ev = tr.last_eval
    result = {
        **_result_base(tr, started),
        "status": Status.FINISHED.value,
        "dev_bleu": ev["dev_bleu"],
        "dev_ppl": ev["dev_ppl"],
        "test_bleu": test_bleu,
        "test_ppl": test_ppl,
        "averaged_checkpoints": [rundir.checkpoint_step(p) for p in paths],
        "sacrebleu_signature": signature,
        "dev_chrf": dev_chrf,
        "test_chrf": test_chrf,
        "chrf_signature": chrf_signature,
    }
    rundir.write_json(result_path, result)
    tr.tracker.log_metrics(
        {"test_bleu": test_bleu, "test_chrf": test_chrf, "dev_chrf": dev_chrf, "test_ppl": test_ppl}, tr.step
    )
    for name in (rundir.RESULT, rundir.DEV_HYP, rundir.TEST_HYP, rundir.CONFIG, rundir.METRICS):
        tr.tracker.log_artifact(str(workdir / name))
    tr.tracker.set_status("FINISHED")
    return result
