"""The tracker interface a run reports to, and a local JSON implementation.

The sweeps package backs the same interface with MLflow; the trainer only
calls these four methods.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Protocol


class Tracker(Protocol):
    def log_params(self, params: dict) -> None: ...
    def log_metrics(self, metrics: dict, step: int) -> None: ...
    def log_artifact(self, path: str) -> None: ...
    def set_status(self, status: str, reason: str = "") -> None: ...


class JsonTracker:
    """Appends every call as one JSON line to a file (default: <workdir>/tracking.jsonl)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, kind: str, **payload) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), "kind": kind, **payload}) + "\n")

    def log_params(self, params: dict) -> None:
        self._write("params", params=params)

    def log_metrics(self, metrics: dict, step: int) -> None:
        self._write("metrics", step=step, metrics=metrics)

    def log_artifact(self, path: str) -> None:
        self._write("artifact", path=str(path))

    def set_status(self, status: str, reason: str = "") -> None:
        self._write("status", status=status, reason=reason)
