"""A real headless Chromium driven over the DevTools protocol (CDP), for the web console's test.

Chromium comes from the system packages (Debian ``chromium``; ``make test`` installs it when
missing); CDP is spoken over aiohttp's websocket client (already installed with
textual-serve), so nothing downloads a browser. Every page gets a hook that keeps the text the
terminal received over its websocket in ``window.__wk_screen`` (what the console drew), so a
test can wait for a view to appear without reading pixels.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--disable-3d-apis", "--disable-extensions", "--mute-audio",
         "--window-size=1280,800", "--remote-debugging-port=0"]

# Keeps what the terminal is sent (the console's output, ANSI and all) where a test can read it.
SCREEN_HOOK = """
(() => {
  window.__wk_screen = "";
  const Real = window.WebSocket;
  window.WebSocket = function (url, protocols) {
    const ws = protocols === undefined ? new Real(url) : new Real(url, protocols);
    const decoder = new TextDecoder();
    ws.addEventListener("message", (e) => {
      if (typeof e.data !== "string") {
        window.__wk_screen = (window.__wk_screen + decoder.decode(e.data, {stream: true})).slice(-400000);
      }
    });
    return ws;
  };
  window.WebSocket.prototype = Real.prototype;
  Object.assign(window.WebSocket, {OPEN: 1, CLOSED: 3, CONNECTING: 0, CLOSING: 2});
})();
"""


def chromium_path() -> str | None:
    """The system's Chromium, or None."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with a fresh profile in ``profile``; ``async with`` opens one
    page and connects to it."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.proc: subprocess.Popen[bytes] | None = None
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Browser:
        exe = chromium_path()
        assert exe, "chromium is not installed"
        self.profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        port = await asyncio.to_thread(self._devtools_port)
        self.session = aiohttp.ClientSession()
        deadline = time.monotonic() + 20
        page_ws = None
        while page_ws is None:
            async with self.session.get(f"http://127.0.0.1:{port}/json/list") as r:
                pages = [t for t in await r.json() if t.get("type") == "page"]
            if pages:
                page_ws = pages[0]["webSocketDebuggerUrl"]
            elif time.monotonic() > deadline:
                raise RuntimeError("chromium opened no page")
            else:
                await asyncio.sleep(0.1)
        self.ws = await self.session.ws_connect(page_ws, max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        await self.send("Page.addScriptToEvaluateOnNewDocument", source=SCREEN_HOOK)
        return self

    def _devtools_port(self) -> int:
        assert self.proc is not None and self.proc.stderr is not None
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode(errors="replace")
            if not line and self.proc.poll() is not None:
                break
            seen.append(line)
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                # keep reading its stderr, so a chatty browser never blocks on a full pipe
                threading.Thread(target=self._drain, daemon=True).start()
                return int(m.group(1))
        raise RuntimeError("chromium did not start its DevTools server: " + "".join(seen[-10:]))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for _ in iter(self.proc.stderr.readline, b""):
            pass

    async def _read(self) -> None:
        assert self.ws is not None
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            fut = self._pending.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                fut.set_result(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One CDP command; returns its ``result``; raises RuntimeError on a CDP error."""
        assert self.ws is not None
        msg_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        await self.ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        data = await asyncio.wait_for(fut, 30)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def screen_text(self) -> str:
        """What the terminal has been sent so far, escape sequences removed."""
        raw = await self.evaluate("window.__wk_screen || ''") or ""
        return re.sub(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]", "", raw)

    async def wait_for_text(self, *needles: str, timeout: float = 45) -> str:
        """Waits until every needle has been drawn; returns the screen text."""
        deadline = time.monotonic() + timeout
        while True:
            text = await self.screen_text()
            if all(n in text for n in needles):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"never drawn: {needles}; last screen text: {text[-2000:]!r}")
            await asyncio.sleep(0.2)

    async def press(self, key: str) -> None:
        """Types one printable key into the focused terminal."""
        await self.send("Input.dispatchKeyEvent", type="keyDown", key=key, text=key, unmodifiedText=key)
        await self.send("Input.dispatchKeyEvent", type="keyUp", key=key)

    async def screenshot(self, path: Path, *, top: int | None = None) -> Path:
        """A PNG of the page (only its ``top`` CSS pixels when given) saved at ``path``."""
        clip = {} if top is None else {"clip": {"x": 0, "y": 0, "width": 1280, "height": top, "scale": 1}}
        shot = await self.send("Page.captureScreenshot", format="png", **clip)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()


async def status_of(url: str, **headers: str) -> int:
    """The HTTP status of a GET, redirects not followed."""
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers, allow_redirects=False) as r:
        return r.status
