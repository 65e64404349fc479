"""Where a sweep lives: a local path every node sees, or a URI of a pyarrow filesystem.

With a plain path (a laptop, or an NFS/FUSE mount shared by the cluster) every
file is written in place.  With a URI (``s3://bucket/sweeps/x``,
``gs://...``, ``hdfs://...``, ``file:///...``) the sweep's home is remote and
each process works in a local scratch directory:

- the driver keeps its small files (sweep.json, the Optuna study, a default
  SQLite MLflow store) in scratch and pushes them after every trial and at the end;
- Ray Tune writes its own state to the URI (``RunConfig(storage_path=URI)``);
- a trial pulls ``URI/trials/ID`` into a scratch directory of its node (so a
  trial that Ray moves to another node resumes from the checkpoint it pushed
  there), pushes what changed after every checkpoint and at the end, then
  deletes its scratch copy;
- ``status`` and ``report`` read a pulled view without checkpoints;
- ``evaluate`` reads the same view, and each of its tasks pulls one trial's
  config, result and averaged checkpoints into its node's scratch, pushes
  ``evals/NAME.{hyp,json}`` back (``put``) and deletes its scratch copy.

Only changed files travel: each push records size and mtime per file, and a
checkpoint the trainer prunes locally is deleted remotely too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable, Optional

from transformer_core.errors import UserError
from transformer_core.rundir import loads

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PUSHED = ".tsweep_pushed.json"
ALLOWED = "a local path every node sees, or a URI of a pyarrow filesystem (file://, s3://, gs://, hdfs://)"


def is_uri(location) -> bool:
    return isinstance(location, str) and bool(_SCHEME.match(location))


def scratch_root() -> Path:
    """Local working space for URI-backed sweeps ($TSWEEP_SCRATCH_DIR or ~/.cache/tsweep/scratch)."""
    from transformer_core.data.prepare import cache_dir

    if os.environ.get("TSWEEP_SCRATCH_DIR"):
        return Path(os.environ["TSWEEP_SCRATCH_DIR"])
    return cache_dir("scratch")


class Storage:
    """A sweep directory behind a pyarrow filesystem URI."""

    def __init__(self, uri: str):
        from pyarrow import fs

        self.uri = uri.rstrip("/")
        try:
            self.fs, root = fs.FileSystem.from_uri(self.uri)
        except Exception as exc:  # unknown scheme, bad bucket name, missing credentials library...
            raise UserError(
                f"sweep location {uri!r} cannot be opened: {str(exc).splitlines()[0]}; allowed: {ALLOWED}"
            ) from None
        self.root = root.rstrip("/")
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.root.rsplit("/", 1)[-1])[-40:] or "sweep"
        self.scratch = scratch_root() / f"{slug}-{hashlib.sha256(self.uri.encode()).hexdigest()[:10]}"

    def path(self, rel: str = "") -> str:
        return f"{self.root}/{rel}".rstrip("/") if rel else self.root

    def check_writable(self) -> None:
        """Fail early, with one line, when the location cannot be written."""
        try:
            self.fs.create_dir(self.root, recursive=True)
            self.write_text(".tsweep_probe", "ok")
            self.fs.delete_file(self.path(".tsweep_probe"))
        except Exception as exc:
            raise UserError(f"sweep location {self.uri!r} is not writable: {str(exc).splitlines()[0]}") from None

    # single files ----------------------------------------------------------
    def exists(self, rel: str) -> bool:
        from pyarrow import fs

        return self.fs.get_file_info(self.path(rel)).type == fs.FileType.File

    def read_text(self, rel: str) -> str:
        with self.fs.open_input_stream(self.path(rel)) as f:
            return f.read().decode("utf-8")

    def write_text(self, rel: str, text: str) -> None:
        self._mkdir_parent(self.path(rel))
        with self.fs.open_output_stream(self.path(rel)) as f:
            f.write(text.encode("utf-8"))

    def _mkdir_parent(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        if parent:
            self.fs.create_dir(parent, recursive=True)

    # trees -------------------------------------------------------------------
    def _remote_files(self, rel: str) -> dict:
        from pyarrow import fs

        base = self.path(rel)
        infos = self.fs.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))
        return {i.path[len(base) + 1 :]: i for i in infos if i.type == fs.FileType.File}

    def pull(self, rel: str, local: Path, keep: Callable[[str], bool] = lambda r: True, overwrite: bool = True) -> int:
        """Copy URI/rel into ``local`` (files whose size and mtime differ); returns files copied."""
        local.mkdir(parents=True, exist_ok=True)
        copied = 0
        for name, info in self._remote_files(rel).items():
            if not keep(name):
                continue
            target = local / name
            stamp = info.mtime.timestamp() if info.mtime else None
            if target.exists() and (
                not overwrite
                or (
                    target.stat().st_size == info.size
                    and stamp is not None
                    and abs(target.stat().st_mtime - stamp) < 1e-3
                )
            ):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".part")
            with self.fs.open_input_stream(info.path) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
            os.replace(tmp, target)
            if stamp is not None:
                os.utime(target, (stamp, stamp))
            copied += 1
        if rel and not (local / _PUSHED).exists():  # what came from the URI counts as pushed
            _write_manifest(local, _scan(local))
        return copied

    def push(self, local: Path, rel: str, top_level_only: bool = False) -> int:
        """Copy what changed under ``local`` to URI/rel; delete remote files removed locally since the last push."""
        before = _read_manifest(local)
        now = _scan(local, top_level_only)
        copied = 0
        for name, stamp in now.items():
            if before.get(name) == stamp:
                continue
            self.put(local / name, f"{rel}/{name}" if rel else name)
            copied += 1
        for name in set(before) - set(now):
            if top_level_only and "/" in name:
                continue
            try:
                self.fs.delete_file(self.path(f"{rel}/{name}" if rel else name))
            except (FileNotFoundError, OSError):
                pass
        _write_manifest(local, {**({k: v for k, v in before.items() if "/" in k} if top_level_only else {}), **now})
        return copied

    def put(self, local: Path, rel: str) -> None:
        """Copy one local file to URI/rel (a SQLite file as a consistent snapshot)."""
        dest = self.path(rel)
        self._mkdir_parent(dest)
        source = _sqlite_snapshot(local) if local.name.endswith(".db") else local
        try:
            with open(source, "rb") as src, self.fs.open_output_stream(dest) as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
        finally:
            if source != local:
                source.unlink(missing_ok=True)

    def view(self) -> Path:
        """A local copy of everything but checkpoints and Tune's state, for status and reports."""
        local = self.scratch / "view"
        try:
            self.pull(
                "",
                local,
                keep=lambda r: (
                    not (r.startswith("tune/") or r.startswith("ddp/") or "/checkpoints/" in r or r.endswith(_PUSHED))
                ),
            )
        except Exception as exc:
            raise UserError(f"cannot read sweep location {self.uri!r}: {str(exc).splitlines()[0]}") from None
        return local


def _sqlite_snapshot(path: Path) -> Path:
    """A consistent copy of a SQLite file that trials may be writing (MLflow, Optuna)."""
    import sqlite3

    snap = path.with_name(path.name + ".snapshot.tmp")
    snap.unlink(missing_ok=True)
    src, dst = sqlite3.connect(path), sqlite3.connect(snap)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
    return snap


def _scan(local: Path, top_level_only: bool = False) -> dict:
    out = {}
    paths = local.iterdir() if top_level_only else local.rglob("*")
    for p in paths:
        if p.is_file() and p.name != _PUSHED and not p.name.endswith((".part", ".tmp")):
            st = p.stat()
            out[p.relative_to(local).as_posix()] = [st.st_size, st.st_mtime_ns]
    return out


def _read_manifest(local: Path) -> dict:
    try:
        return loads((local / _PUSHED).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _write_manifest(local: Path, manifest: dict) -> None:
    (local / _PUSHED).write_text(json.dumps(manifest))


def open_storage(location) -> Optional[Storage]:
    return Storage(location) if is_uri(location) else None


def local_view(location) -> Path:
    """The directory to read a sweep from: the path itself, or a pulled view of a URI."""
    store = open_storage(str(location))
    return store.view() if store else Path(location)
