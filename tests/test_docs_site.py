"""The built documentation site, looked at in headless Chromium through the DevTools protocol.

Checks every page of ``site/`` (built by ``mkdocs build --strict``; see the README): it loads
without console errors or failed requests, its formulas are typeset by MathJax, the notebook
pages show their plots (``img`` elements with PNG data that decoded), and search finds
``KernelExplainer`` (in ``search/search_index.json`` and in the search box's results).
Screenshots of the home page and one API page are written to a folder the test prints.

Skipped, with the reason, when Debian's ``chromium``, ``websocket-client`` or the built site is
missing, so the README's plain ``pytest`` passes without them; with ``JAXSHAP_DOCS_REQUIRED=1``
(CI's ``.ci/run`` sets it) a missing piece fails instead.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
ARTEFACTS = Path(os.environ.get("JAXSHAP_DOCS_ARTEFACTS", ROOT / "build" / "docs-screenshots"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _missing() -> str | None:
    if CHROMIUM is None:
        return "Debian's chromium is not installed (apt-get install -y chromium)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "websocket-client is not installed (pip install -e '.[docs]')"
    if not (SITE / "index.html").exists():
        return "the site is not built (mkdocs build --strict)"
    return None


_reason = _missing()
if _reason is not None:
    if os.environ.get("JAXSHAP_DOCS_REQUIRED") == "1":
        raise RuntimeError(f"JAXSHAP_DOCS_REQUIRED=1 but {_reason}")
    pytest.skip(_reason, allow_module_level=True)

import websocket  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Page:
    """One browser tab driven over the DevTools protocol; records console errors."""

    def __init__(self, ws_url: str):
        # No Origin header: Chromium refuses DevTools sockets from origins it was not told to allow.
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.errors: list[str] = []
        self.events: list[dict] = []
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(method)

    def _record(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.errors.append("exception: " + params["exceptionDetails"].get("exception", {}).get("description", str(params)))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            self.errors.append(f"request failed: {params.get('errorText')}")
        self.events.append(msg)

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._record(msg)

    def goto(self, url: str, timeout: float = 30.0) -> None:
        self.errors.clear()
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load in {timeout} s")
            self._record(json.loads(self.ws.recv()))

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))


@pytest.fixture(scope="module")
def browser():
    port = _free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(_Quiet, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    debug_port = _free_port()
    profile = tempfile.mkdtemp(prefix="jaxshap-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", f"--user-data-dir={profile}", f"--remote-debugging-port={debug_port}",
         "--remote-allow-origins=*", "--window-size=1280,900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list", timeout=2) as r:
                    tabs = [t for t in json.load(r) if t.get("type") == "page"]
                if tabs:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromium's DevTools endpoint did not come up")
            time.sleep(0.2)
        page = Page(tabs[0]["webSocketDebuggerUrl"])
        yield page, f"http://127.0.0.1:{port}/"
        page.ws.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)


def _pages() -> list[str]:
    return sorted(str(p.relative_to(SITE).parent).replace(".", "") for p in SITE.rglob("index.html")
                  if not p.relative_to(SITE).parts[0] in ("assets", "search"))


MATH = "document.querySelectorAll('span.MathJax, div.MathJax_Display').length"
MARKED = "document.querySelectorAll('.arithmatex').length"
IDLE = "!!(window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running)"


def test_every_page_loads_without_console_errors_and_typesets_its_formulas(browser):
    page, base = browser
    pages = _pages()
    assert len(pages) >= 20, pages
    failures, typeset = {}, {}
    for rel in pages:
        page.goto(base + (rel + "/" if rel else ""))
        if not page.wait_for(IDLE):
            failures.setdefault(rel, []).append("MathJax did not start or finish")
        marked, rendered = page.js(MARKED), page.js(MATH)
        if rendered < marked:  # every formula arithmatex marked has MathJax's output
            failures.setdefault(rel, []).append(f"formulas not typeset: {rendered} of {marked}")
        if rendered:
            typeset[rel] = rendered
        time.sleep(0.2)  # late console messages
        page.call("Runtime.evaluate", expression="0")
        if page.errors:
            failures.setdefault(rel, []).extend(page.errors)
    print(f"{len(pages)} pages loaded without console errors; typeset formulas per page: {typeset}")
    assert not failures, failures
    for rel in ("maskers", "explainers/kernel", "notebooks/02_linear_models"):
        assert typeset.get(rel, 0) >= 1, (rel, typeset)


def test_notebook_pages_show_their_plots(browser):
    page, base = browser
    notebooks = [p for p in _pages() if p.startswith("notebooks/")]
    assert len(notebooks) >= 5, notebooks
    plots = {}
    for rel in notebooks:
        page.goto(f"{base}{rel}/")
        plots[rel] = page.wait_for(
            "Array.from(document.images).filter(i => i.src.startsWith('data:image/png') && i.complete"
            " && i.naturalWidth > 0).length")
    print("decoded plots per notebook page:", plots)
    assert sum(plots.values()) >= len(notebooks), plots
    assert plots.get("notebooks/01_quickstart", 0) >= 1, plots


def test_search_finds_kernel_explainer(browser):
    index = json.loads((SITE / "search" / "search_index.json").read_text())
    hits = [d["location"] for d in index["docs"] if "KernelExplainer" in d["title"] + d["text"]]
    assert any("api/jaxshap" in h for h in hits), hits[:10]
    page, base = browser
    page.goto(f"{base}?q=KernelExplainer")
    found = page.wait_for(
        "Array.from(document.querySelectorAll('.md-search-result__item')).map(e => e.textContent)"
        ".filter(t => t.includes('KernelExplainer')).length", timeout=30)
    assert found, "the search box returned no result naming KernelExplainer"
    print(f"search: {len(hits)} index entries and {found} results in the search box name KernelExplainer")


def test_screenshots(browser):
    page, base = browser
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    for name, rel in (("home.png", ""), ("explainer_tree.png", "explainers/tree/"), ("api_jaxshap.png", "api/jaxshap/"),
                      ("benchmarks.png", "benchmarks/")):
        page.goto(base + rel)
        page.wait_for(IDLE)
        page.screenshot(ARTEFACTS / name)
        assert (ARTEFACTS / name).stat().st_size > 10_000
    print(f"screenshots in {ARTEFACTS}")
