"""A small headless-Chromium driver over the DevTools protocol, standard library only.

Chromium runs with `--remote-debugging-pipe`: it reads protocol commands from fd 3 and writes
replies and events to fd 4, each message one JSON text ended by a NUL byte. One page is attached
in flat session mode; console calls, uncaught exceptions and log entries (a script or file that
failed to load) are collected as they arrive, so a test can assert that a page made none.

    with Browser() as browser:
        browser.open(Path("site/index.html").as_uri())
        browser.scroll_through("kernelgapIdle()")  # the dashboard draws charts as they show
        state = browser.wait_for("document.body.dataset.rendered === 'all'", timeout_s=30)
        browser.screenshot(Path("shot.png"))
        assert not browser.errors()
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["Browser", "BrowserError", "chromium_path"]

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)
COMMAND_TIMEOUT_S = 30.0


class BrowserError(RuntimeError):
    """Chromium could not be started, died, or answered a command with an error."""


def chromium_path() -> str | None:
    """The Chromium executable (Debian's `chromium`, else `chromium-browser`), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _high_fd(fd: int) -> int:
    """A close-on-exec duplicate of `fd` numbered 10 or above; `fd` is closed."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 2400, executable: str | None = None):
        executable = executable or chromium_path()
        if executable is None:
            raise BrowserError("chromium is not installed (Debian: apt-get install chromium)")
        self.width, self.height = width, height
        self._profile = tempfile.TemporaryDirectory(prefix="kernelgap-chromium-")
        commands_read, self._commands = os.pipe()  # we write commands, chromium reads fd 3
        self._replies, replies_write = os.pipe()  # chromium writes fd 4, we read
        # Above 9 so that moving them onto 3 and 4 in the child cannot overwrite one another.
        commands_read, replies_write = (_high_fd(commands_read), _high_fd(replies_write))
        self._stderr = open(Path(self._profile.name) / "stderr.log", "wb")  # noqa: SIM115

        def fds_3_and_4():
            os.dup2(commands_read, 3)
            os.dup2(replies_write, 4)

        self._process = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            pass_fds=(3, 4),
            preexec_fn=fds_3_and_4,  # only dup2 calls: safe in a single-threaded caller
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self._session = None
        try:
            self._session = self._attach()
        except BaseException:
            self.close()
            raise

    # -- the protocol --------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self._replies], [], [], left)
            if ready:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise BrowserError(f"chromium exited (status {self._process.poll()})")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, *, page: bool = True) -> dict:
        """Send one command (to the page's session unless page=False); its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if page and self._session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def _attach(self) -> str:
        targets = self.send("Target.getTargets", page=False)["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        if page is None:
            page = {"targetId": self.send("Target.createTarget", {"url": "about:blank"})}
            page["targetId"] = page["targetId"]["targetId"]
        attached = self.send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, page=False
        )
        self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )
        return self._session

    # -- what a test uses ----------------------------------------------------------------
    def open(self, url: str) -> None:
        """Navigate to `url` and wait for its load event."""
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = (details.get("exception") or {}).get("description") or details.get("text")
            raise BrowserError(f"evaluating {expression!r}: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0, poll_s: float = 0.05):
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"waited {timeout_s} s for {expression!r}")
            time.sleep(poll_s)

    def scroll_through(self, settled: str) -> int:
        """Scroll the page from top to bottom a window at a time, at each stop awaiting the
        JavaScript promise `settled` (say, until what is in view is drawn); then back to the
        top, awaiting it once more. The number of stops."""
        y, stops = 0, 0
        while True:
            self.evaluate(f"scrollTo(0, {y})")
            self.evaluate(settled)
            stops += 1
            window, page = self.evaluate("[innerHeight, document.documentElement.scrollHeight]")
            if y + window >= page:
                break
            y += window
        self.evaluate("scrollTo(0, 0)")
        self.evaluate(settled)
        return stops

    def mouse(self, x: float, y: float, click: bool = False) -> None:
        """Move the mouse to (x, y) in CSS pixels of the viewport; then click there if asked."""
        point = {"x": x, "y": y}
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", **point})
        if click:
            for kind in ("mousePressed", "mouseReleased"):
                self.send(
                    "Input.dispatchMouseEvent",
                    {"type": kind, **point, "button": "left", "buttons": 1, "clickCount": 1},
                )

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """A PNG of the viewport (or of the whole page) written to `path`."""
        params: dict = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}
            params["clip"]["scale"] = 1
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and error log entries so far."""
        out = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning"):
                args = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                out.append(f"console.{params['type']}: {args}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = (details.get("exception") or {}).get("description") or details["text"]
                out.append(f"exception: {text}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                entry = params["entry"]
                out.append(f"log {entry['level']}: {entry['text']} {entry.get('url', '')}".strip())
        return out

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.send("Browser.close", page=False)
                self._process.wait(timeout=10)
            except (BrowserError, OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        for fd in (self._commands, self._replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._stderr.close()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
