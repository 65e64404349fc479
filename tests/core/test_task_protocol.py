"""The trainer's Task contract: both tasks satisfy transformer_core.task.Task, member by member."""

import inspect
import typing

import pytest

from tests.helpers import tiny_run_config
from transformer_core.lm_task import LMTask
from transformer_core.task import Task
from transformer_core.trainer import Trainer, task_for
from transformer_core.translation_task import TranslationTask

METHODS = [n for n, v in vars(Task).items() if inspect.isfunction(v) and not n.startswith("_")]
ATTRIBUTES = ("name", "tracked", "artifacts")


@pytest.fixture
def tasks(fixture_data_dir):
    return {
        "translation": task_for(tiny_run_config(fixture_data_dir)),
        "lm": task_for(tiny_run_config(fixture_data_dir, task="lm", direction="en")),
    }


def test_the_protocol_names_every_member_the_trainer_uses():
    assert sorted(METHODS) == ["corpus", "evaluate", "final", "inputs", "model", "result_keys", "versions"]
    assert set(ATTRIBUTES) <= set(typing.get_type_hints(Task))


def test_both_tasks_are_tasks_with_the_protocols_signatures(tasks):
    assert isinstance(tasks["translation"], TranslationTask) and isinstance(tasks["lm"], LMTask)
    for name, task in tasks.items():
        assert isinstance(task, Task)
        assert task.name == name
        assert all(isinstance(getattr(task, a), tuple) for a in ("tracked", "artifacts"))
        for method in METHODS:
            want = list(inspect.signature(getattr(Task, method)).parameters)
            got = list(inspect.signature(getattr(type(task), method)).parameters)
            assert got == want, f"{type(task).__name__}.{method}{got} is not Task.{method}{want}"


def test_an_object_without_every_member_is_not_a_task(tasks):
    class NoFinal:
        name, tracked, artifacts = "x", (), ()

        def corpus(self, config): ...
        def model(self, config, vocab_size): ...
        def inputs(self, batch): ...
        def evaluate(self, tr): ...
        def versions(self): ...
        def result_keys(self): ...

    assert not isinstance(NoFinal(), Task)
    NoFinal.final = lambda self, tr, averaged: None
    assert isinstance(NoFinal(), Task)


def test_the_trainer_takes_a_task():
    hints = typing.get_type_hints(Trainer.__init__)
    assert hints["task"] == typing.Optional[Task]
    assert typing.get_type_hints(task_for)["return"] is Task


def test_the_trainer_has_every_member_a_task_reads_of_it():
    from transformer_core.task import TrainingState

    members = TrainingState.__annotations__
    assert set(members) == {"cfg", "workdir", "device", "precision", "corpus", "dev", "model", "step", "last_eval"}
    init = inspect.getsource(Trainer.__init__)
    assert all(f"self.{name}" in init for name in members)
