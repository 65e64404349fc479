"""WMT14 recipes end to end against a loopback mirror (HTTP on 127.0.0.1) serving small archives in the real
layouts (tests/fixtures/wmt, made by make_fixtures.py): splits and sizes, newstest through sacrebleu's loader,
resume of an interrupted download, checksums, an unreachable host."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, ROOT
from transformer_core.data import load_corpus
from transformer_core.data.corpus import read_meta
from transformer_core.data.fetch import MIRROR_ENV, http_file
from transformer_core.data.prepare import prepare_text
from transformer_core.data.recipes import wmt
from transformer_core.errors import DataError

FIXTURE = FIXTURES / "wmt"


class Mirror:
    """A file server on 127.0.0.1 (port 0) that honours `Range: bytes=N-`; it stops itself after `lifetime` s.

    `truncate`: paths whose first response announces the whole length and closes after half of it.
    `throttle`: seconds to sleep after every 4 KiB sent (a slow transfer, to interrupt).
    """

    def __init__(self, root: Path, truncate=(), throttle: float = 0.0, lifetime: float = 120.0):
        self.root, self.truncate, self.throttle = root, set(truncate), throttle
        self.requests: list[tuple[str, str | None]] = []
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                mirror.requests.append((self.path, self.headers.get("Range")))
                path = mirror.root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                body = data[start:]
                if self.path in mirror.truncate:
                    mirror.truncate.discard(self.path)
                    body = body[: len(body) // 2]
                for i in range(0, len(body), 4096):
                    self.wfile.write(body[i : i + 4096])
                    if mirror.throttle:
                        time.sleep(mirror.throttle)
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(lifetime, self.server.shutdown)
        self.timer.daemon = True

    def __enter__(self):
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        self.server.shutdown()
        self.server.server_close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixture_path(url: str) -> Path:
    return FIXTURE / url.split("/", 3)[3]


@pytest.fixture
def fixture_checksums(monkeypatch):
    """The checksum table of the fixture's archives, in place of the real files' (same URLs)."""
    table = {url: ("sha256", sha256(fixture_path(url))) for url in wmt.CHECKSUMS}
    monkeypatch.setattr(wmt, "CHECKSUMS", table)
    return table


@pytest.fixture
def mirror(monkeypatch, fixture_checksums):
    with Mirror(FIXTURE) as m:
        monkeypatch.setenv(MIRROR_ENV, m.url)
        yield m


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_fixture_is_what_make_fixtures_writes(tmp_path):
    """The committed archives are the generator's output (fixed times: the same bytes every time)."""
    before = {p: sha256(p) for p in FIXTURE.rglob("*.tgz")}
    assert len(before) == 5
    r = subprocess.run([sys.executable, str(FIXTURE / "make_fixtures.py")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert {p: sha256(p) for p in FIXTURE.rglob("*.tgz")} == before


def test_wmt14_en_de_splits_sizes_and_sacrebleu_references(tmp_path, mirror):
    corpus = load_corpus("wmt14-en-de", 120, tmp_path)
    meta = corpus.meta
    # train: 35 + 21 + 15 lines; cleaning drops the empty pair, the ratio pair and the duplicate, and the
    # pair whose source is a test source (leakage)
    assert meta["sizes"] == {"train": 71 - 4, "dev": 6, "test": 5}
    assert meta["dropped"]["train"] == {"empty": 1, "identical": 0, "duplicate": 1, "length": 0, "ratio": 1}
    assert meta["train_pairs_removed_for_leakage"] == 1
    assert meta["dropped"]["dev"] == {} and meta["dropped"]["test"] == {}  # standard test sets are kept as given
    # dev and test are sacrebleu's text of the SGML (whitespace collapsed), identical pairs and repeats kept
    sb = tmp_path / "_downloads" / "wmt" / "sacrebleu"
    assert lines(corpus.directory / "test.tgt") == lines(sb / "wmt14_full" / "wmt14_full.en-de.ref")
    assert lines(corpus.directory / "test.src") == lines(sb / "wmt14_full" / "wmt14_full.en-de.src")
    assert lines(corpus.directory / "dev.src")[1] == "The council approved the budget."
    assert lines(corpus.directory / "dev.tgt")[3] == "Barack Obama" and lines(corpus.directory / "test.tgt")[3] == (
        "Real Madrid"
    )
    assert lines(corpus.directory / "dev.tgt")[4:6] == ["Das Spiel endete unentschieden."] * 2
    assert lines(corpus.directory / "test.tgt")[0] == "Gutach: Noch mehr Sicherheit für Fußgänger"
    # a carriage return inside a Common Crawl line is not a line break: the alignment holds (cleaning drops it)
    en, de = lines(corpus.directory / "train.src"), lines(corpus.directory / "train.tgt")
    assert de[en.index("HotelBerlin Mitte, rooms from 80 euros")] == "HotelBerlin Mitte, Zimmer ab 80 Euro"
    assert all(("hotel" in e.lower()) == ("hotel" in d.lower()) for e, d in zip(en, de))
    prov = meta["provenance"]["wmt14-en-de"]
    assert prov["train"]["europarl-v7"]["pairs"] == 35 and prov["train"]["commoncrawl"]["pairs"] == 21
    assert prov["test"] == "newstest2014 (sacrebleu -t wmt14/full -l en-de)"
    assert corpus.vocab_size > 50 and len(corpus.split("train")) == 67
    # every file came from the mirror, each archive once (the second language pair reuses them)
    assert sorted(p for p, _ in mirror.requests) == sorted("/" + u.split("/", 3)[3] for u in wmt.CHECKSUMS)
    fr = prepare_text("wmt14-en-fr", tmp_path)
    assert read_meta(fr)["sizes"] == {"train": 30 + 20 + 15, "dev": 6, "test": 5}  # the noise is in de-en only
    assert lines(fr / "test.tgt")[4] == "Le musée est fermé les jours fériés."
    assert len(mirror.requests) == 5  # nothing fetched again


def test_de_en_direction_swaps_the_test_set(tmp_path, mirror):
    d = prepare_text("wmt14-en-de", tmp_path, direction="de-en")
    assert lines(d / "test.src")[0] == "Gutach: Noch mehr Sicherheit für Fußgänger"
    assert lines(d / "test.tgt")[0] == "Gutach: Increased safety for pedestrians"


def test_truncated_response_is_resumed_with_range(tmp_path, mirror):
    url = wmt.CORPORA["europarl-v7"][0]
    path = "/" + url.split("/", 3)[3]
    mirror.truncate.add(path)
    out = http_file(url, tmp_path / "europarl.tgz", wmt.CHECKSUMS[url])
    assert sha256(out) == wmt.CHECKSUMS[url][1] and not (tmp_path / "europarl.tgz.part").exists()
    size = fixture_path(url).stat().st_size
    assert [r for p, r in mirror.requests if p == path] == [None, f"bytes={size // 2}-"]


def test_killed_download_resumes_where_it_stopped(tmp_path, monkeypatch):
    blob = tmp_path / "srv" / "wmt13" / "big.tgz"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(os.urandom(400_000))
    url, dest = "https://www.statmt.org/wmt13/big.tgz", tmp_path / "data" / "big.tgz"
    part = dest.with_name("big.tgz.part")
    checksum = ("sha256", sha256(blob))
    with Mirror(tmp_path / "srv", throttle=0.01) as m:  # ~4 s for the whole file
        monkeypatch.setenv(MIRROR_ENV, m.url)
        code = f"from pathlib import Path; from transformer_core.data.fetch import http_file; http_file({url!r}, Path({str(dest)!r}), {checksum!r})"  # noqa: E501
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy())
        deadline = time.time() + 60
        while time.time() < deadline and (not part.exists() or part.stat().st_size < 40_000):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        kept = part.stat().st_size
        assert 40_000 <= kept < 400_000 and not dest.exists()
        m.throttle = 0.0
        http_file(url, dest, checksum)
    assert dest.read_bytes() == blob.read_bytes() and not part.exists()
    assert m.requests[-1] == ("/wmt13/big.tgz", f"bytes={kept}-")


def test_checksum_mismatch_is_refused_and_the_file_removed(tmp_path, mirror, monkeypatch):
    url = wmt.CORPORA["commoncrawl"][0]
    monkeypatch.setitem(wmt.CHECKSUMS, url, ("sha256", "0" * 64))
    with pytest.raises(DataError) as err:
        prepare_text("wmt14-en-de", tmp_path)
    message = str(err.value)
    assert "does not match its checksum" in message and "the file was removed" in message and "\n" not in message
    name = Path(url).name
    assert not list(tmp_path.rglob(name)) and not list(tmp_path.rglob(name + ".part"))
    assert not list(tmp_path.glob("wmt14-en-de*"))  # no corpus directory, complete or not


def test_unreachable_host_fails_in_one_line_within_the_timeout(tmp_path):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, MIRROR_ENV: f"http://127.0.0.1:{port}", "TSWEEP_DOWNLOAD_TIMEOUT": "5"}
    start = time.time()
    r = subprocess.run(
        [sys.executable, "-m", "sweeps.cli", "data", "prepare", "wmt14-en-de", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode != 0 and time.time() - start < 60
    errors = [line for line in r.stderr.splitlines() if not line.startswith("INFO ")]  # progress logging aside
    assert len(errors) == 1 and errors[0].startswith("tsweep data: error: cannot download"), r.stderr
    assert f"127.0.0.1:{port}" in errors[0] and "Traceback" not in r.stderr
    written = [p for p in (tmp_path / "d").rglob("*") if p.is_file() and not p.name.startswith(".lock-")]
    assert written == []


def test_a_server_that_never_answers_times_out_in_one_line(tmp_path, monkeypatch):
    with socket.socket() as s:  # accepts connections (the kernel's backlog) but never answers
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{s.getsockname()[1]}")
        monkeypatch.setenv("TSWEEP_DOWNLOAD_TIMEOUT", "1")
        start = time.time()
        with pytest.raises(DataError) as err:
            http_file(wmt.CORPORA["europarl-v7"][0], tmp_path / "e.tgz", ("sha256", "0" * 64))
    assert time.time() - start < 10 and "timed out" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
