"""The console in a real browser: headless Chromium opens the served console with a token,
waits for the escalations view, acknowledges the top escalation with `a`, and the ledger
records the acknowledgement under the token's name. A wrong or missing token gets the
server's refusal and never a console. (Read-only tokens and the other access rules:
test_web_access.py, in-process.)"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.ledger import escalations
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.browser import Browser, chromium_path, status_of

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(chromium_path() is None, reason="chromium not installed (make test installs it)")]

ARTEFACTS = Path(__file__).resolve().parents[1] / "artefacts"
ANA = "ana-browser-token-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """`watchkeeper console --web` on a ledger with open escalations, with a token file."""
    ledger = tmp_path / "wk.db"
    ids = cf.build(ledger)
    with Ledger(ledger) as db:
        # the runners stopped cleanly: the console expects none, so no runner_gap escalation
        # slides in on top of the one the test acknowledges
        db.conn.execute("UPDATE runners SET stopped_at = heartbeat_at, stop_reason = 'SIGTERM'")
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[ana-in-browser]\ntoken = "{ANA}"\n')
    tokens.chmod(0o600)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "console", "--web", "--ledger", str(ledger),
                             "--bind", f"127.0.0.1:{port}", "--token-file", str(tokens), "--refresh", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"server did not start: {proc.stdout.read().decode()}") from None
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/", ledger, ids
    finally:
        # the server and the consoles it started for each tab
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _esc(ledger: Path, esc_id: int) -> dict:
    with Ledger(ledger, read_only=True) as db:
        return escalations.get(db, esc_id)


async def _wait_acked(ledger: Path, esc_id: int, timeout: float = 30) -> dict:
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        esc = _esc(ledger, esc_id)
        if esc["state"] == "acknowledged" or time.monotonic() > deadline:
            return esc
        await asyncio.sleep(0.2)


async def test_a_browser_acknowledges_an_escalation_as_the_tokens_name(served, tmp_path):
    url, ledger, ids = served
    assert await status_of(url) == 401
    assert await status_of(url + "?token=not-the-token-at-all") == 403
    assert await status_of(url + "ws", Authorization="Bearer wrong-token-0123456789") == 403
    async with Browser(tmp_path / "profile") as browser:
        await browser.send("Page.navigate", url=url + "?token=" + ANA)
        # the escalations view, the critical backup-db escalation on top, as the token's name
        await browser.wait_for_text("Escalations", "as ana-in-browser", "backup-db", "CRIT")
        await browser.screenshot(ARTEFACTS / "web_console_escalations.png")
        # the header, the view bar and the first rows: what OCR reads below (less to read)
        shot = await browser.screenshot(tmp_path / "top.png", top=120)
        assert "token=" not in await browser.evaluate("window.location.href")
        await browser.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        await browser.press("a")
        esc = await _wait_acked(ledger, ids["esc_crit"])
        assert (esc["state"], esc["acked_by"]) == ("acknowledged", "ana-in-browser")
        await browser.wait_for_text("acked")
        await browser.screenshot(ARTEFACTS / "web_console_acknowledged.png")
    if shutil.which("tesseract"):
        text = subprocess.run(["tesseract", str(shot), "-", "--psm", "6"], capture_output=True, text=True,
                              env={**os.environ, "OMP_THREAD_LIMIT": "1"}).stdout
        assert "backup-db" in text and "CRIT" in text, f"the screenshot does not show the escalation: {text!r}"
