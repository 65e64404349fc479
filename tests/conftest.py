import os
from pathlib import Path

import pytest

from tests.helpers import FIXTURES

E2E = Path(__file__).resolve().parent / "e2e"
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # test modules import MLflow before sweeps.run.tracking


@pytest.fixture(scope="session")
def bible_fixture_db():
    return FIXTURES / "bible-mini.db"


@pytest.fixture(scope="session", autouse=True)
def fixture_data_dir(tmp_path_factory, bible_fixture_db):
    """A data directory where bible-en-de is the committed fixture (a few hundred real verses).

    Set for the whole session so that no test reads or writes the user's own data cache."""
    os.environ["TSWEEP_BIBLE_DB"] = str(bible_fixture_db)
    path = tmp_path_factory.mktemp("data")
    os.environ["TSWEEP_DATA_DIR"] = str(path)
    os.environ["TSWEEP_SCRATCH_DIR"] = str(tmp_path_factory.mktemp("scratch"))  # URI-backed sweeps' local work
    return path


@pytest.fixture(scope="session")
def fixture_corpus(fixture_data_dir):
    from transformer_core.data import load_corpus

    return load_corpus("bible-en-de", 1000, fixture_data_dir)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    """Every test under tests/e2e/ is end to end: it gets the ``e2e`` marker (deselect with -m "not e2e")."""
    for item in items:
        if E2E in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _compiled_code_never_falls_back_silently(request):
    """torch keeps up to ``recompile_limit`` (8) compiled versions of a function in a process, then runs it
    uncompiled with a warning only: a test past that would pass without testing what it compiles.  Here reaching
    the limit is an error, and each test starts from an empty compile cache, as a trial's own process does (one
    pytest process runs many tests that compile the same step at other shapes; which of them came first must not
    decide whether a later one compiles)."""
    import sys

    gpu = request.node.get_closest_marker("gpu") is not None
    if not gpu and ("torch" not in sys.modules or request.node.get_closest_marker("e2e") is not None):
        yield  # a process that never imported torch has compiled nothing; an e2e test compiles in its children
        return
    import torch._dynamo

    torch._dynamo.config.fail_on_recompile_limit_hit = True
    torch._dynamo.reset()
    yield


@pytest.fixture(scope="session")
def _made_sweep(tmp_path_factory):
    from tests.analysis.test_analysis import make_sweep

    return make_sweep(tmp_path_factory.mktemp("made") / "sweep")


@pytest.fixture
def made_sweep(_made_sweep, tmp_path):
    """A copy of tests/analysis/test_analysis.py's fixture sweep (made once per session) to damage."""
    import shutil

    return shutil.copytree(_made_sweep, tmp_path / "sweep")
