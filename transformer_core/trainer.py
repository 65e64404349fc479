"""The training loop's state, whatever the task: optimiser steps, checkpoints, the divergence rule, the
result's common keys.  What a task adds (its corpus, model, evaluation and final scores) is a ``task.Task``
(the protocol, member by member); translation_task.TranslationTask and lm_task.LMTask are the two, and
``task_for(config)`` picks one.
"""

from __future__ import annotations

import logging
import math
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

from . import rundir
from .compiling import ForwardLoss
from .data import BatchStream
from .data.packing import PackedStream
from .device import resolve_device, resolve_precision
from .distributed import sum_gradients, world
from .dropout import set_fast_dropout
from .errors import ConfigError
from .layers import set_residual_dtype
from .lm_task import LMTask
from .model import count_parameters
from .native_memory import gb, peak_bytes, reset_peak
from .optim import learning_rate, make_adam
from .packed_step import STREAMS, PackedForwardLoss, resolve_packing
from .run_config import RunConfig, TrainConfig
from .segments import FLEX_BLOCK, FLEX_TILES
from .task import Task
from .tracking import Tracker
from .translation_task import TranslationTask

log = logging.getLogger(__name__)
Progress = Callable[[dict], None]

DIVERGENCE_MARGIN = 2.0
"""Nats above ln(vocab_size) (the loss of a uniform guess) beyond which a logging window's
training loss counts as diverging: a model that learns anything is below ln(vocab_size)
after warmup."""

DIVERGENCE_WINDOWS = 3
"""Consecutive diverging logging windows (each wholly after warmup) that end a run as "diverged"."""

DIVERGENCE_FACTOR = 3.0
"""A logging window whose training loss is above this many times ln(vocab_size) ends the run as "diverged" at
once, at any step, warmup included.  A fresh model starts near ln(vocab_size), the loss of a uniform guess; at
three times that it gives the right piece on average less than vocab_size^-3 of probability, which takes
weights blown up by the learning rate.  On the smoke profile a warmup spike that the run recovered from peaked
below twice ln(vocab_size) (lr_scale 16), while at lr_scale 64 and above the loss passed three times within
the first windows and kept rising."""


def task_for(config: RunConfig) -> Task:
    """The Task of ``config.data.task``, its configuration checked (one line naming the field)."""
    return (LMTask if config.data.task == "lm" else TranslationTask)(config)


def is_eval_step(step: int, t: TrainConfig) -> bool:
    """Whether optimiser step ``step`` ends with an evaluation and a checkpoint: every eval_every and the last."""
    return step % t.eval_every == 0 or step == t.steps


def is_log_step(step: int, t: TrainConfig) -> bool:
    """Whether optimiser step ``step`` closes a logging window: every log_every and the last."""
    return step % t.log_every == 0 or step == t.steps


def claim_workdir(config: RunConfig, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / rundir.CONFIG
    trained = any((workdir / name).exists() for name in (rundir.METRICS, rundir.RESULT, rundir.CHECKPOINTS))
    if path.exists() and trained:  # a config.json alone (a run that failed before training) is replaced
        try:
            old = rundir.loads(path.read_text()).get("hash")
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


def save_checkpoint(workdir: Path, state: dict, keep: int) -> None:
    directory = workdir / rundir.CHECKPOINTS
    directory.mkdir(exist_ok=True)
    path = directory / rundir.checkpoint_name(state["step"])
    rundir.write_atomic(path, lambda f: torch.save(state, f), _nbytes(state))
    for old in rundir.checkpoints(workdir)[:-keep]:
        old.unlink()


_CHECKPOINT_KEYS = ("step", "model", "optimizer", "stream", "rng", "tokens", "seconds", "last_eval")


def load_checkpoint(path: Path) -> dict:
    state = torch.load(path, map_location="cpu", weights_only=True)
    missing = [k for k in _CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"not a checkpoint: no {', '.join(missing)}")
    return state


class DivergenceRule:
    """Diverged: the training loss of one logging window, at any step, above DIVERGENCE_FACTOR x ln(vocab_size)
    (far above a uniform guess: blown up, in warmup too); or of DIVERGENCE_WINDOWS windows in a row, each wholly
    after warmup, above ln(vocab_size) + DIVERGENCE_MARGIN.  ``high`` (the current run) survives a resume."""

    def __init__(self, vocab_size: int, warmup: int, high: int = 0):
        self.vocab_size, self.warmup, self.high = vocab_size, warmup, high
        self.threshold = math.log(vocab_size) + DIVERGENCE_MARGIN
        self.far = DIVERGENCE_FACTOR * math.log(vocab_size)

    def update(self, start: int, end: int, loss: float) -> Optional[str]:
        """One window, steps start+1 .. end, and its loss; the reason when the run has diverged."""
        if loss > self.far:
            return (
                f"training loss {loss:.2f} above {self.far:.2f} ({DIVERGENCE_FACTOR:g} x ln {self.vocab_size}, far "
                f"worse than a uniform guess) in the logging window up to step {end}"
                + (f", during warmup ({self.warmup} steps)" if start < self.warmup else "")
            )
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
    """The loop's state; train.train_and_evaluate drives it.  ``task`` defaults to task_for(config)."""

    def __init__(
        self,
        config: RunConfig,
        workdir: Path,
        tracker: Tracker,
        progress: Optional[Progress],
        task: Optional[Task] = None,
    ):
        self.cfg, self.workdir, self.tracker, self.progress = config, workdir, tracker, progress
        self.task = task or task_for(config)
        t = config.train
        reset_peak()  # this trial's peak resident memory, not an earlier trial's in a reused worker
        if t.threads:
            torch.set_num_threads(t.threads)
        self.device = resolve_device(t.device)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.precision = resolve_precision(t.precision, self.device)
        self.corpus = self.task.corpus(config)
        self.train_split, self.dev = self.corpus.split("train"), self.corpus.split("dev")
        torch.manual_seed(t.seed)
        self.model = self.task.model(config, self.corpus.vocab_size).to(self.device)
        self.params = count_parameters(self.model)
        set_fast_dropout(self.model, t.fast_dropout)
        if t.residual_dtype != "fp32" and self.precision != "bf16":
            raise ConfigError(
                f"residual_dtype={t.residual_dtype!r} is invalid with precision {self.precision} on {self.device.type}:"
                " allowed 'fp32' (a bf16 residual stream needs precision bf16)"
            )
        set_residual_dtype(self.model, t.residual_dtype)
        self.opt = make_adam(self.model.parameters(), (t.adam_beta1, t.adam_beta2), t.adam_eps, t.fused_adam)
        self.packing, self.packing_reason = resolve_packing(
            t.packing, config.model, self.device, config.data.task, self.precision, t.packed_attention, t.compile
        )
        self.compile_seconds: Optional[float] = None  # compiled: the first step this process trains, compiling included
        self.rank, self.world = world()
        if t.accumulate % self.world:
            raise ConfigError(
                f"accumulate={t.accumulate} is invalid with {self.world} workers: allowed a multiple of "
                "the worker count (the global batch is tokens_per_batch x accumulate)"
            )
        self.local_accumulate = t.accumulate // self.world
        args = (self.train_split, t.tokens_per_batch, t.seed, t.max_train_len)
        self.stream: BatchStream
        self.forward_loss: ForwardLoss | PackedForwardLoss
        if self.packing:
            # tiles at FlexAttention's own (flex64: 64 tokens; every other backend the 128 of the blocks layout)
            packed = PackedStream(*args, rank=self.rank, world_size=self.world, fill=t.packing == "fill",
                                  layout=packed_layout(t, self.packing),
                                  block=FLEX_TILES.get(self.packing, FLEX_BLOCK))  # fmt: skip
            self.stream = packed
            self.forward_loss = PackedForwardLoss(
                self.model,
                t.eps_ls,
                self.device,
                self.precision,
                t.compile,
                self.packing,
                packed.shape,
                self.local_accumulate,
                t.loss_kernel,
            )
            if self.forward_loss.why:
                log.info("compile=%s: %s", t.compile, self.forward_loss.why)
        else:
            self.stream = BatchStream(*args, rank=self.rank, world_size=self.world)
            self.forward_loss = ForwardLoss(self.model, t.eps_ls, self.device, self.precision, t.compile, t.loss_kernel)
        if self.world > 1:
            torch.manual_seed(t.seed * 1000 + self.rank)  # same initial weights, own dropout masks
        # a packed step on one GPU draws its next micro-batch (and starts its copy to the device) after queueing
        # its optimizer's kernels and before its one read of the device, so the GPU does not wait for the host's
        # packing between steps: the same batches in the same order, a checkpoint saves the stream before it
        self.lookahead = self.device.type == "cuda" and bool(self.packing) and self.world == 1
        self._ahead: Optional[tuple] = None  # (stream state before the draw, batch, device tensors)
        # loss_sync=window, one worker: a step's losses stay on the device until its logging window closes (or an
        # evaluation, or the last step), then every unread step is read at once and accounted in order, with the
        # same records, losses and divergence checks as a read per step; meanwhile the host queues the next step
        # while the device runs this one instead of waiting for it.  Several workers read every step (the
        # all-reduce takes host numbers).
        self.lazy = t.loss_sync == "window" and self.world == 1
        self._unread: list[tuple[int, torch.Tensor, int]] = []  # (step, its stacked device sums, its tokens)
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
            # where the next batch was drawn ahead, the stream as it was before: a resumed run draws it again
            "stream": {k: int(v) for k, v in (self._ahead[0] if self._ahead else self.stream.state()).items()},
            "rng": torch.get_rng_state(),
            "tokens": int(self.tokens),
            "seconds": {k: float(v) for k, v in self.seconds.items()},
            "last_eval": dict(self.last_eval),
            "high_loss_windows": self.divergence.high,
        }

    def resume(self) -> bool:
        state = rundir.newest_checkpoint(self.workdir, load_checkpoint)
        if state is None:
            return False
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.stream.restore(state["stream"])
        self._ahead = None
        self._unread = []
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
        sums = []  # (loss, NLL) sums of each micro-batch, on the device until the step's end
        ntok = 0
        started = time.perf_counter()
        for _ in range(self.local_accumulate):
            t0 = time.perf_counter()
            if isinstance(self.forward_loss, PackedForwardLoss):
                batch, tensors = self._ahead[1:] if self._ahead else self._draw_packed()
                self._ahead = None
                t1 = time.perf_counter()
                self.seconds["data"] += t1 - t0
                loss, nll = self.forward_loss(tensors)  # every position of the buffer, the tail weighted 0
                ntok += batch.tokens  # a host number: the step reads nothing back
            else:
                batch = next(self.stream)
                inputs, index, target = self.forward_loss.prepare(self.task.inputs(batch), batch.tgt_out)
                t1 = time.perf_counter()
                self.seconds["data"] += t1 - t0
                loss, nll = self.forward_loss(inputs, index, target)  # logits of real target positions only
                ntok += index.numel()
            loss.backward()
            sums += [loss.detach(), nll]
            self.seconds["train"] += time.perf_counter() - t1
        t1 = time.perf_counter()
        if self.world > 1:  # the all-reduce takes host numbers: one more wait for the device per step
            loss_sum, nll_sum = _read_sums(sums)
            loss_sum, nll_sum, ntok = sum_gradients(list(self.model.parameters()), [loss_sum, nll_sum, ntok])
            ntok = int(round(ntok))
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        torch._foreach_div_(grads, max(ntok, 1))  # mean over every target token of the step (all workers)
        if t.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm)
        lr = learning_rate(self.step + 1, t.steps, self.cfg.model.d_model, t.warmup, t.lr_scale, t.schedule, t.cooldown)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if self.world == 1:
            if self.lookahead:  # the next micro-batch is drawn and sent while the device runs this step
                t2 = time.perf_counter()
                self._ahead = (self.stream.state(), *self._draw_packed())
                self.seconds["data"] += time.perf_counter() - t2
                t1 += time.perf_counter() - t2
            if self.lazy:  # read when the window closes (advance): a copy queued now, before the next step
                self._unread.append((self.step + 1, torch.stack(sums), ntok))
            else:
                # the step's one read of the device, after the optimizer's kernels are queued: on a GPU a read
                # waits for the device, and the host queues nothing meanwhile (benchmarks/results/gpu_step_h200.txt)
                loss_sum, nll_sum = _read_sums(sums)
        self.seconds["train"] += time.perf_counter() - t1
        if self.compile_seconds is None and self.forward_loss.mode in ("on", "graphs"):
            self.compile_seconds = round(time.perf_counter() - started, 2)
        self.step += 1
        self.tokens += ntok
        if self.lazy:
            return math.nan, math.nan, ntok  # not read yet: advance() reads it with its window
        return loss_sum / max(ntok, 1), nll_sum / max(ntok, 1), ntok

    def _draw_packed(self) -> tuple:
        """The stream's next packed batch and its tensors on their way to the device."""
        batch = next(self.stream)
        return batch, self.forward_loss.prepare(batch)

    def advance(self) -> tuple[Optional[float], Optional[dict], Optional[str]]:
        """One optimiser step: its loss, the train record when it closes a logging window, and why the run
        has diverged if it has.  Every worker sees the same (summed) losses, so all decide alike.  With
        loss_sync=window the loss is None at the steps whose losses wait for their window's end (settle)."""
        loss, nll, ntok = self.train_step()
        if not self.lazy:
            return self._account(self.step, loss, nll, ntok)
        t = self.cfg.train
        if not (is_log_step(self.step, t) or is_eval_step(self.step, t)):
            return None, None, None  # the loss of this step is read when its window closes
        return self.settle()

    def settle(self) -> tuple[Optional[float], Optional[dict], Optional[str]]:
        """Read every unread step's losses at once (one wait for the device, counted as training time) and account
        them in order, as advance() does a step read at once.  At the first step that diverged the run is taken
        back to it (its step and token counts, as a read every step would have stopped there); the steps queued
        after it were trained for nothing."""
        unread, self._unread = self._unread, []
        if not unread:
            return None, None, None
        t0 = time.perf_counter()
        values = torch.cat([sums for _, sums, _ in unread]).tolist()
        self.seconds["train"] += time.perf_counter() - t0  # the device's work the host queued ahead of it
        out: tuple = (None, None, None)
        at = 0
        for i, (step, sums, ntok) in enumerate(unread):
            own = values[at : at + len(sums)]
            at += len(sums)
            loss_sum, nll_sum = _summed(own)
            out = self._account(step, loss_sum / max(ntok, 1), nll_sum / max(ntok, 1), ntok)
            if out[2]:
                self.tokens -= sum(later for _, _, later in unread[i + 1 :])
                self.step = step
                break
        return out

    def _account(self, step: int, loss: float, nll: float, ntok: int):
        """Step ``step``'s losses into the logging window: (loss, the train record where it closes the window,
        why the run has diverged where it has)."""
        if not math.isfinite(loss):
            return loss, None, f"non-finite training loss at step {step}"
        w = self.window
        w.loss, w.nll, w.tokens = w.loss + loss * ntok, w.nll + nll * ntok, w.tokens + ntok
        if not is_log_step(step, self.cfg.train):
            return loss, None, None
        self.window = _Window(step)
        rec = {
            "kind": "train",
            "step": step,
            "loss": w.loss / max(w.tokens, 1),
            "nll": w.nll / max(w.tokens, 1),
            "lr": self.opt.param_groups[0]["lr"],
            "tokens_per_second": w.tokens / max(time.perf_counter() - w.t0, 1e-9),
        }
        return loss, rec, self.divergence.update(w.start, step, rec["loss"])

    def evaluate(self) -> tuple[dict, dict[str, list[str]]]:
        """The task's evaluation at this step (timed as eval): its record and the files it writes."""
        t0 = time.perf_counter()
        scores, files = self.task.evaluate(self)
        self.seconds["eval"] += time.perf_counter() - t0
        return {"step": self.step, "steps": self.cfg.train.steps, **scores}, files


def result_base(tr: Trainer, started: float) -> dict:
    """The keys every result.json of the run has, finished or diverged."""
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
        "beam_stop": t.beam_stop,
        "seed": t.seed,
        "device": str(tr.device),
        "precision": tr.precision,
        "residual_dtype": tr.cfg.train.residual_dtype,
        "threads": torch.get_num_threads(),
        "compile": tr.forward_loss.mode,
        "compile_seconds": tr.compile_seconds,
        "fused_adam": t.fused_adam,
        "loss_kernel": tr.forward_loss.loss_kernel,  # as it ran (a compiled step: plain, fused by the compiler)
        **packing_keys(tr),
        "fast_dropout": t.fast_dropout and tr.device.type == "cpu" and tr.forward_loss.mode == "off",  # int32 masks ran
        "peak_rss_gb": gb(peak_bytes()),  # the process's peak resident memory since this Trainer was built
        "peak_cuda_gb": gb(torch.cuda.max_memory_allocated(tr.device)) if tr.device.type == "cuda" else None,
        "torch_version": torch.__version__,
        **tr.task.versions(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "corpus": tr.cfg.data.corpus,
        "corpus_fingerprint": tr.corpus.fingerprint,
        "vocab_size": tr.corpus.vocab_size,
        **tr.task.result_keys(),
    }


def packed_layout(t, backend: str) -> str:
    """The layout a packed stream lays its batches out in (data/packing.py): ``blocks`` for packing=blocks; for
    packing on or fill, ``tiles`` where the knob packed_layout asks for it or (auto) the attention is FlexAttention,
    except under varlen attention (a block's gap can be longer than the longest sentence, which varlen is told);
    else ``end``."""
    if t.packing == "blocks":
        return "blocks"
    wanted = t.packed_layout == "tiles" or (t.packed_layout == "auto" and backend in FLEX_TILES)
    return "tiles" if wanted and backend != "varlen" else "end"


def packing_keys(tr: Trainer) -> dict:
    """How the trial's batches were laid out: packed (with its attention backend and buffer shape) or padded
    (and why, where packing was asked for), and the random stream that layout draws."""
    if not isinstance(tr.stream, PackedStream):
        return {"packing": "off", "packing_reason": tr.packing_reason, "batch_stream": STREAMS["off"]}
    shape = tr.stream.shape
    return {
        "packing": tr.packing,
        "packing_reason": tr.packing_reason,
        "packed_shape": {"capacity": shape.capacity, "segments": shape.segments},
        "batch_stream": STREAMS["blocks" if tr.stream.layout == "blocks" else "fill" if tr.stream.fill else "on"],
        "packed_layout": tr.stream.layout,
    }


def _read_sums(sums: list) -> tuple[float, float]:
    """(loss sum, NLL sum) over micro-batches from their alternating device scalars, summed on the host."""
    return _summed(torch.stack(sums).tolist())


def _summed(values: list[float]) -> tuple[float, float]:
    """(loss sum, NLL sum) of a step's micro-batches from their alternating host values."""
    return sum(values[0::2]), sum(values[1::2])
