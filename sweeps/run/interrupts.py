"""SIGINT and SIGTERM while ``tsweep run`` drives a sweep: the sweep ends as interrupted, never as done.

- The first signal is recorded.  During a Tune run, Tune's next step is asked for its graceful stop
  (``stop_tune``: SIGUSR1, which Tune handles while it runs): running trials are stopped and keep their
  checkpoints, and the driver closes the sweep as interrupted.  Outside a Tune run (Ray starting, between
  adaptive rounds) the next round is not started.
- A second signal stops at once (KeyboardInterrupt), except while the sweep is being closed: closing
  (MLflow runs ended, sweep.json written, the lock released) always runs to its end.
- The exit status says which signal it was: 130 for SIGINT, 143 for SIGTERM.

Ray's driver installs a C++ failure handler for SIGTERM that prints a stack dump and aborts, and ray.init sets
a Python one that exits at once: ``install`` runs again after Ray has started, so that ours is the one in place.
Only the ``tsweep run`` command activates this; a library caller keeps Tune's own SIGINT handling.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A second signal (or one outside a Tune run that must not wait): stop now."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Interrupts:
    """The driver's signal state: which signal came first, how many came, what the driver is doing."""

    def __init__(self):
        self.active = False
        self.signum: Optional[int] = None  # the first signal received
        self.count = 0
        self.closing = False  # closing the sweep: signals are only counted
        self._told_tune = False
        self._previous: dict = {}

    def activate(self) -> None:
        """Take over SIGINT and SIGTERM for the rest of this process's sweep (the CLI's ``tsweep run``)."""
        self.active, self.signum, self.count, self.closing, self._told_tune = True, None, 0, False, False
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # Tune's handler would hide the first SIGINT from us
        self.install()

    def install(self) -> None:
        """(Re)install the handlers: after ray.init, which replaces the SIGTERM handler (twice)."""
        if not self.active or threading.current_thread() is not threading.main_thread():
            return
        for s in SIGNALS:
            previous = signal.signal(s, self._handle)
            self._previous.setdefault(s, previous)

    def deactivate(self) -> None:
        if not self.active:
            return
        self.active = False
        os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        if threading.current_thread() is threading.main_thread():
            for s, previous in self._previous.items():
                signal.signal(s, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)

    def stop_tune(self) -> None:
        """Called at every step of a Tune run (a callback, in the main thread, after Tune set up its handlers):
        after the first signal, SIGUSR1 asks Tune to stop gracefully, once."""
        if self.signum and not self._told_tune and hasattr(signal, "SIGUSR1"):
            self._told_tune = True
            signal.raise_signal(signal.SIGUSR1)

    def _handle(self, signum: int, frame) -> None:
        self.count += 1
        self.signum = self.signum or signum
        if self.count > 1 and not self.closing:
            raise Stopped(signum)


INTERRUPTS = Interrupts()
