"""report.html in a real headless Chromium (make test-browser; not in the default suite).

Chromium is driven over its DevTools protocol (aiohttp's websocket client, already installed with Ray):
load the page from a file URL, collect console errors and exceptions, check that every image decoded,
and save a screenshot next to the report.
"""

import asyncio
import base64
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from analysis.report.writers import write_report
from tests.analysis.test_analysis import make_sweep

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


async def _inspect(ws_url: str, page_url: str, shot: Path) -> dict:
    import aiohttp

    errors, ids = [], iter(range(1, 10_000))
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:

        async def call(method, **params):
            mid = next(ids)
            await ws.send_json({"id": mid, "method": method, "params": params})
            while True:
                msg = json.loads((await ws.receive()).data)
                _note(msg, errors)
                if msg.get("id") == mid:
                    return msg.get("result", {})

        for domain in ("Page", "Runtime", "Log"):
            await call(f"{domain}.enable")
        await call("Emulation.setDeviceMetricsOverride", width=1400, height=1800, deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=page_url)
        while True:  # until the load event
            msg = json.loads((await asyncio.wait_for(ws.receive(), 30)).data)
            _note(msg, errors)
            if msg.get("method") == "Page.loadEventFired":
                break
        expr = "JSON.stringify(Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0]))"
        images = json.loads((await call("Runtime.evaluate", expression=expr))["result"]["value"])
        plots = "document.querySelectorAll('.plotly-graph-div .main-svg').length"  # plotly figures drawn
        drawn = (await call("Runtime.evaluate", expression=plots))["result"].get("value", 0)
        png = await call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        shot.write_bytes(base64.b64decode(png["data"]))
    return {"errors": errors, "images": images, "plots": drawn}


def _note(msg: dict, errors: list) -> None:
    m, p = msg.get("method"), msg.get("params", {})
    if m == "Runtime.exceptionThrown":
        errors.append(p["exceptionDetails"].get("text"))
    elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
        errors.append(str(p.get("args")))
    elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
        errors.append(p["entry"].get("text"))


def check_page(html: Path, shot: Path) -> dict:
    """Open html in headless Chromium; returns {"errors": [...], "images": [[alt, loaded], ...]}."""
    profile = tempfile.mkdtemp(prefix="chromium-")
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             "about:blank"], stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        ws_url = None
        for line in proc.stderr:
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                ws_url = found.group(1)
                break
        assert ws_url, "chromium did not open its DevTools port"
        import urllib.request

        port = ws_url.split(":")[2].split("/")[0]
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10).read())
        page = next(t for t in targets if t["type"] == "page")
        return asyncio.run(_inspect(page["webSocketDebuggerUrl"], html.resolve().as_uri(), shot))
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test-browser installs it)")
def test_report_renders_without_errors_and_every_image_loads(tmp_path):
    out = write_report(make_sweep(tmp_path / "sweep"), tmp_path / "report", samples=50)
    result = check_page(out / "report.html", out / "report.png")
    assert result["errors"] == []
    assert result["images"] and all(ok for _, ok in result["images"]), result["images"]
    assert (out / "report.png").stat().st_size > 10_000


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test-browser installs it)")
def test_the_search_reports_interactive_plots_draw_offline(tmp_path):
    from analysis.report.document import Heading
    from analysis.report.search_interactive import interactive_plots, ship_script
    from analysis.report.search_report import render_html
    from tests.analysis.test_search_interactive import _study

    live = interactive_plots(_study(tmp_path / "optuna.db", "s", ["minimize"]), "s")
    ship_script(tmp_path)  # plotly.min.js beside the page, loaded from a file URL: nothing fetched
    page = tmp_path / "report.html"
    page.write_text(render_html([Heading(1, "Search report: s")], {}, "s", live))
    result = check_page(page, tmp_path / "report.png")
    assert result["errors"] == [] and result["plots"] >= len(live) == 4, result
