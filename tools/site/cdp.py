"""Headless Chromium driven over the Chrome DevTools Protocol, with the network shut off.

    with Chromium() as browser:
        page = browser.new_page(allow=["http://127.0.0.1:8000/"])
        page.goto("http://127.0.0.1:8000/index.html")
        page.evaluate("document.title")
        page.problems()   # console errors, uncaught exceptions, blocked requests

Uses Debian's `chromium` (or $CHROMIUM) and the websocket-client package; no browser is
downloaded. Every request whose URL does not start with an allowed prefix (the local server)
is failed by the test itself (Fetch domain) and recorded, so a page that would need a CDN
fails its check even on a machine with internet access.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--disable-extensions", "--mute-audio",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    # name resolution off as well: only literal loopback addresses reach anything
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


class BrowserError(RuntimeError):
    """Chromium missing, not starting, or a page not answering in time."""


def find_chromium() -> str:
    """$CHROMIUM, else the first Chromium-like program on PATH."""
    exe = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, CANDIDATES)), None)
    if not exe:
        raise BrowserError("no Chromium found: install Debian's package (apt-get install -y chromium) "
                           "or set CHROMIUM=/path/to/chrome")
    return exe


class Page:
    """One tab: navigation, script evaluation, screenshots, and what went wrong in it."""

    def __init__(self, ws_url: str, allow: list[str], timeout: float = 60):
        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.allow = list(allow) + ["data:", "blob:", "about:"]
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        self.console_errors: list[str] = []
        self.blocked: list[str] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Fetch.enable", patterns=[{"urlPattern": "*"}])
        self.send("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1,
                  mobile=False)
        self.send("Emulation.setFocusEmulationEnabled", enabled=True)  # apps that track focus

    # --- protocol -------------------------------------------------------------------------
    def _post(self, method: str, params: dict) -> int:
        i = next(self.ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        return i

    def send(self, method: str, timeout: float = 60, **params) -> dict:
        """Call a protocol method and return its result (raises on a protocol error)."""
        i = self._post(method, params)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._receive(deadline)
            if msg.get("id") == i:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def _receive(self, deadline: float) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrowserError("the browser did not answer in time")
        self.ws.settimeout(left)
        try:
            msg = json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException as exc:
            raise BrowserError("the browser did not answer in time") from exc
        if "method" in msg:
            self._event(msg["method"], msg.get("params", {}))
        return msg

    def _event(self, method: str, p: dict) -> None:
        self.events.append({"method": method, "params": p})
        if method == "Fetch.requestPaused":
            url = p["request"]["url"]
            if any(url.startswith(a) for a in self.allow):
                self._post("Fetch.continueRequest", {"requestId": p["requestId"]})
            else:
                self.blocked.append(url)
                self._post("Fetch.failRequest", {"requestId": p["requestId"], "errorReason": "BlockedByClient"})
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.console_errors.append(f"console.{p['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.console_errors.append(f"uncaught: {text.splitlines()[0] if text else d}")
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            e = p["entry"]
            self.console_errors.append(f"log: {e.get('text')} {e.get('url', '')}".strip())

    def pump(self, seconds: float) -> None:
        """Handle events for a while (lets paused requests through)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self._receive(deadline)
            except BrowserError:
                return

    # --- actions --------------------------------------------------------------------------
    def goto(self, url: str, timeout: float = 60) -> None:
        """Navigate and wait for the load event."""
        self.events.clear()
        res = self.send("Page.navigate", url=url)
        if res.get("errorText"):
            raise BrowserError(f"{url}: {res['errorText']}")
        deadline = time.monotonic() + timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            self._receive(deadline)

    def evaluate(self, expression: str, timeout: float = 60):
        """The JSON value of a JavaScript expression (promises are awaited)."""
        res = self.send("Runtime.evaluate", timeout=timeout, expression=expression,
                        returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise BrowserError(f"script failed: {d.get('exception', {}).get('description') or d.get('text')}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float, poll: float = 0.25):
        """Evaluate until the value is truthy; return it (or the last value on timeout)."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            self.pump(poll)
        return value

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole page unless full_page=False)."""
        params = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": min(size[1], 12000), "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and blocked (non-local) requests so far."""
        return self.console_errors + [f"network request blocked (not local): {u}" for u in self.blocked]

    def reset_problems(self) -> None:
        self.console_errors.clear()
        self.blocked.clear()

    def close(self) -> None:
        self.ws.close()


class Chromium:
    """A headless Chromium in a fresh profile; stopped (with its profile removed) on exit."""

    def __init__(self, exe: str | None = None, start_timeout: float = 60):
        self.exe = exe or find_chromium()
        self.start_timeout = start_timeout

    def __enter__(self) -> Chromium:
        self.profile = tempfile.mkdtemp(prefix="course-chromium-")
        self.proc = subprocess.Popen([self.exe, *FLAGS, "--remote-debugging-port=0",
                                      f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.start_timeout
        while not (port_file.is_file() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:]
                self.__exit__()
                raise BrowserError(f"{self.exe} exited {self.proc.returncode}:\n{err}")
            if time.monotonic() > deadline:
                self.__exit__()
                raise BrowserError(f"{self.exe} did not open its DevTools port in {self.start_timeout:.0f} s")
            time.sleep(0.1)
        self.port = int(port_file.read_text().splitlines()[0])
        return self

    def version(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/version", timeout=10) as r:
            return json.load(r)["Browser"]

    def new_page(self, allow: list[str]) -> Page:
        """A new tab whose requests may only go to URLs starting with one of `allow`."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=20) as r:
            target = json.load(r)
        return Page(target["webSocketDebuggerUrl"], allow)

    def __exit__(self, *exc) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, 15)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, 9)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.profile, ignore_errors=True)
