"""The Task protocol: what a task adds to the training loop (trainer.py), whatever it trains.

The Trainer owns the loop's state (steps, optimiser, checkpoints, the divergence rule, the result's common keys);
a Task supplies the corpus, the model, the inputs a batch gives the model, what an evaluation step scores and
what the final, averaged model is scored by.  ``translation_task.TranslationTask`` and ``lm_task.LMTask`` are the
two; ``trainer.task_for(config)`` picks one by ``config.data.task``.

The protocol is runtime-checkable: ``isinstance(obj, Task)`` tells whether ``obj`` has every member (not their
signatures; tests/core/test_task_protocol.py compares those for the two tasks).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # for the annotations only
    import torch
    from torch import nn

    from .data.batching import Batch
    from .data.corpus import Corpus, EncodedSplit
    from .run_config import RunConfig

Files = dict  # file name under the run directory -> its lines (written by the trainer, one line each)


class TrainingState(Protocol):
    """What a task reads of the loop's state at an evaluation (``trainer.Trainer`` is one; the trainer imports the
    tasks, so a task names this rather than the Trainer)."""

    cfg: RunConfig
    workdir: Path
    device: torch.device
    precision: str
    corpus: Corpus
    dev: EncodedSplit
    model: nn.Module
    step: int
    last_eval: dict


@runtime_checkable
class Task(Protocol):
    name: str
    """"translation" or "lm": the run's ``data.task``."""

    tracked: tuple[str, ...]
    """The evaluation keys logged to the tracker at every evaluation (when not None) and passed to progress."""

    artifacts: tuple[str, ...]
    """The files of the run directory logged to the tracker at the end."""

    def corpus(self, config: RunConfig) -> Corpus:
        """The prepared corpus (vocabulary, splits) the run trains and evaluates on."""
        ...

    def model(self, config: RunConfig, vocab_size: int) -> nn.Module:
        """A fresh model: an ``nn.Module`` with ``features(*inputs) -> (B, T, d_model)`` and ``generator``."""
        ...

    def inputs(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """The tensors ``model.features`` takes from a training batch (its targets are ``batch.tgt_out``)."""
        ...

    def evaluate(self, tr: TrainingState) -> tuple[dict, Files]:
        """At an evaluation step: (the evaluation record, files to write)."""
        ...

    def final(self, tr: TrainingState, averaged: list[int]) -> tuple[dict, dict, Files]:
        """On the averaged model at the end: (result keys, tracker metrics, files to write)."""
        ...

    def versions(self) -> dict:
        """The versions of the libraries the task's scores depend on, for every result.json."""
        ...

    def result_keys(self) -> dict:
        """The task's identity keys in every result.json (none for translation)."""
        ...
