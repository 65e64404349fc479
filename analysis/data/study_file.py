"""A search's optuna.db (SQLite) read without trusting or writing it.

Optuna opens a SQLite storage read-write and creates its tables in whatever file it is given (an mlflow.db copied
in as optuna.db gains Optuna's schema), and a file that is not a database fails deep inside SQLAlchemy.  So a study
file is checked first, in one line naming what is wrong (``StudyFileError``): its size, its SQLite header, its
pages (``PRAGMA quick_check`` on a private copy), Optuna's tables and the study's name; and a study that is only
read (an earlier sweep's, for a warm start; the report's distributions) is opened on that private copy, so that
nothing is ever written into the file itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Iterator, Optional

from transformer_core.errors import UserError

HEADER = b"SQLite format 3\x00"
TABLES = frozenset(("studies", "trials", "trial_params", "trial_values", "version_info"))  # Optuna's RDB schema
MAX_BYTES = 256 << 20  # a search's study is a few MB; larger is not one (a sparse file, a database of another tool)
MAX_ENV = "TSWEEP_MAX_STUDY_BYTES"


class StudyFileError(UserError):
    """An optuna.db that is not a readable Optuna study."""


def _max_bytes() -> int:
    text = os.environ.get(MAX_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else MAX_BYTES


def _check_bytes(path: Path) -> int:
    """The file's size, after checking that it is a regular file of SQLite's format within the size limit."""
    try:
        if not path.is_file():
            raise StudyFileError("it is not a regular file")
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(len(HEADER))
    except OSError as exc:
        raise StudyFileError(f"it cannot be read: {exc.strerror or exc}") from None
    if size > _max_bytes():
        raise StudyFileError(f"it is {size:,} bytes, more than the {_max_bytes():,} a search's study takes "
                             f"(set {MAX_ENV}=N to allow more)")  # fmt: skip
    if size and head != HEADER:
        raise StudyFileError("it is not an SQLite database (no SQLite header)")
    return size


def _check_copy(copy: Path, study_name: Optional[str]) -> list[str]:
    """The study names of the SQLite file ``copy`` (private: SQLite may write a journal beside it), after checking
    its pages and Optuna's tables; ``study_name``: the study it must hold."""
    try:
        con = sqlite3.connect(copy)
        try:
            check = con.execute("PRAGMA quick_check(1)").fetchone()
            if not check or check[0] != "ok":
                raise StudyFileError(f"its pages are damaged ({check[0] if check else 'no answer'})")
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            missing = sorted(TABLES - tables)
            if missing:
                raise StudyFileError(f"it is a database without Optuna's tables ({', '.join(missing)} missing)")
            names = [r[0] for r in con.execute("SELECT study_name FROM studies ORDER BY study_id")]
        finally:
            con.close()
    except sqlite3.Error as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StudyFileError(f"it is not a readable database ({why})") from None
    if study_name is not None and names and study_name not in names:
        shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise StudyFileError(f"it holds the study {shown}, not {study_name!r}: it is another sweep's")
    return names


@contextlib.contextmanager
def private_copy(path: Path, study_name: Optional[str] = None) -> Iterator[Optional[Path]]:
    """A checked private copy of the study file at ``path`` (None for an empty file), removed afterwards.

    Raises StudyFileError (one line: why) where it is not a readable Optuna study of ``study_name``."""
    path = Path(path)
    with _named(path):
        size = _check_bytes(path)
    if not size:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tsweep-study-") as tmp:
        copy = Path(tmp) / "optuna.db"
        with _named(path):
            try:
                shutil.copyfile(path, copy)
            except OSError as exc:
                raise StudyFileError(f"it cannot be copied to read it: {exc.strerror or exc}") from None
            _check_copy(copy, study_name)
        yield copy


@contextlib.contextmanager
def _named(path: Path) -> Iterator[None]:
    """A StudyFileError raised inside, with the file named in front of its reason."""
    try:
        yield
    except StudyFileError as exc:
        raise StudyFileError(f"{str(path)!r} is not a usable Optuna study file: {exc}") from None


def check_study_file(path: Path, study_name: str) -> None:
    """Raise StudyFileError where the file at ``path`` (if any) is not a sweep's own study file of ``study_name``:
    an Optuna study of that name, or an empty one (Optuna creates its tables and the study in it)."""
    if os.path.lexists(path):
        with read_study(path, study_name, missing_ok=True):
            pass


@contextlib.contextmanager
def read_study(path: Path, study_name: Optional[str], missing_ok: bool = False):
    """The study ``study_name`` (else the file's only one) of the study file at ``path``, loaded from a private
    copy (None: the file is empty or holds no study, and ``missing_ok``); StudyFileError, naming the file, where
    it is not a readable Optuna study."""
    with private_copy(path, study_name) as copy:
        with _named(Path(path)):
            if copy is None and not missing_ok:
                raise StudyFileError("it is empty")
            study = load_study(copy, study_name, missing_ok) if copy else None
        yield study


def load_study(copy: Path, study_name: Optional[str], missing_ok: bool = False):
    """The study ``study_name`` of the private copy ``copy`` (else its only study), or StudyFileError; None where
    the file holds no study and ``missing_ok``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = f"sqlite:///{copy}"
    try:
        names = optuna.get_all_study_names(storage)
        name = study_name if study_name in names else (names[0] if len(names) == 1 else None)
        if name is None:
            if missing_ok and not names:
                return None
            raise StudyFileError(f"it holds no study named {study_name!r}")
        return optuna.load_study(study_name=name, storage=storage)
    except StudyFileError:
        raise
    except Exception as exc:  # an Optuna of another schema version, a table of the wrong shape
        raise StudyFileError(f"Optuna cannot read it ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
