"""tsweep data on the WMT recipes' fixture archives (served by the fixtures of tests/core/test_wmt.py)."""

import pytest

from sweeps.cli import main as tsweep_main
from tests.core.test_wmt import fixture_checksums, mirror  # noqa: F401  (the fixtures the test takes)


@pytest.mark.usefixtures("mirror")
def test_data_info_reports_pairs_time_and_disk(tmp_path, capsys):
    assert tsweep_main(["data", "prepare", "wmt14-en-de", "--vocab", "120", "--data-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert tsweep_main(["data", "info", "wmt14-en-de", "--vocab", "120", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.split()[:1] in (["train"], ["test"])}
    assert rows == {"train": "67", "test": "5"}
    assert "time        fetch, clean and split" in out and "of which fetching" in out
    assert "disk        " in out and "downloads" in out and str(tmp_path / "_downloads" / "wmt") in out
