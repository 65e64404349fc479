"""The sweep's lock file is never followed out of the sweep (a second, hostile read of issue 43): a sweep.lock
planted as a link to another file is refused in one line, and that file keeps its bytes."""

import os

import pytest

from sweeps.lock import SweepLock
from transformer_core.errors import UserError


def test_a_lock_planted_as_a_link_is_refused_and_its_target_left_alone(tmp_path):
    victim = tmp_path / "other-sweep" / "sweep.json"
    victim.parent.mkdir()
    victim.write_text('{"name": "other"}')
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.lock").symlink_to(victim)
    with pytest.raises(UserError, match="cannot open the lock"):
        SweepLock.acquire(str(sweep), sweep)
    assert victim.read_text() == '{"name": "other"}'


def test_a_lock_that_is_not_a_regular_file_is_refused(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    os.mkfifo(sweep / "sweep.lock")
    with pytest.raises(UserError, match="not a regular file"):
        SweepLock.acquire(str(sweep), sweep)
    (sweep / "sweep.lock").unlink()
    SweepLock.acquire(str(sweep), sweep).release()  # a regular lock file is taken as before
