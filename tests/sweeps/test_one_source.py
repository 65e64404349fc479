"""Restructuring moves no byte: the snapshot (tests/sweeps/snapshot.py: plans, ids and hashes of every shipped spec at
every profile, help texts, reports) compared with one taken before the change.

    .venv/bin/python -m tests.sweeps.snapshot /tmp/baseline        # at the commit before the change
    TSWEEP_SNAPSHOT=/tmp/baseline .venv/bin/pytest tests/sweeps/test_one_source.py
"""

import difflib
import os
from pathlib import Path

import pytest

from tests.sweeps.snapshot import write_snapshot

BASELINE = os.environ.get("TSWEEP_SNAPSHOT")


@pytest.mark.skipif(not BASELINE, reason="no baseline snapshot (TSWEEP_SNAPSHOT=DIR)")
def test_the_snapshot_matches_the_baseline(tmp_path):
    base, now = Path(BASELINE), tmp_path / "now"
    write_snapshot(now)
    files = {p.relative_to(base) for p in base.rglob("*") if p.is_file()}
    assert files == {p.relative_to(now) for p in now.rglob("*") if p.is_file()}
    changed = []
    for rel in sorted(files):
        a, b = (base / rel).read_bytes(), (now / rel).read_bytes()
        if a != b:
            old, new = (x.decode(errors="replace").splitlines() for x in (a, b))
            diff = difflib.unified_diff(old, new, str(rel), str(rel), lineterm="", n=1)
            changed.append("\n".join(list(diff)[:40]))
    assert not changed, "\n\n".join(changed)
