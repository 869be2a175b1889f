"""Notifications: an outbox in the ledger, delivered to sinks with retries and backoff.

Opening, reopening or (when the opening was notified) recovering an escalation inserts one
``notifications`` row per configured sink, in the same transaction as the escalation change,
so nothing is lost across a crash. ``deliver_due`` (called from ``supervisor.periodic``)
sends what is due within a time budget: ``pending`` → ``sent``, or back to ``pending`` with
``attempts + 1`` and ``next_attempt_at`` pushed out exponentially, or ``failed`` after
``MAX_ATTEMPTS``. A restarted runner simply picks up the pending rows.

Sinks (``core.spec.settings``): ``CommandSink`` runs a program with the payload as JSON on stdin;
``WebhookSink`` POSTs the payload as JSON (with a Slack-compatible ``text``) via urllib.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

from core.ledger.connection import Ledger, row_dict
from core.ledger.outbox import enqueue, payload_for  # noqa: F401 (the outbox's face for callers)
from core.spec.settings import CommandSink, WebhookSink

MAX_ATTEMPTS = 8
BACKOFF_INITIAL_S = 5.0
BACKOFF_MAX_S = 3600.0
#: A claimed row is not picked again for this long (another runner's periodic may overlap).
CLAIM_S = 60.0

Sink = CommandSink | WebhookSink


def backoff_s(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed tries (5 s, 10 s, 20 s … ≤ 1 h)."""
    return min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** max(0, attempts - 1))


def send_command(sink: CommandSink, body: str, timeout: float) -> None:
    """Run the sink's program with ``body`` on stdin. Raises RuntimeError on failure/timeout."""
    try:
        proc = subprocess.Popen(sink.command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise RuntimeError(f"cannot start {sink.command[0]}: {exc}") from None
    try:
        _, err = proc.communicate(body.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise RuntimeError(f"timed out after {timeout:g}s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {err.decode('utf-8', 'replace').strip()[-300:]}")


def send_webhook(sink: WebhookSink, body: str, timeout: float) -> None:
    """POST ``body`` (JSON) to the sink's URL. Raises RuntimeError on a non-2xx or network error."""
    if not sink.url.startswith(("http://", "https://")):
        raise RuntimeError(f"unsupported URL scheme: {sink.url}")
    req = urllib.request.Request(sink.url, data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "watchkeeper"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - scheme checked above
            if not 200 <= resp.status < 300:
                raise RuntimeError(f"HTTP {resp.status}")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from None


def send(sink: Sink, body: str, timeout: float) -> None:
    """Deliver one payload to one sink. Raises RuntimeError on failure."""
    if isinstance(sink, CommandSink):
        send_command(sink, body, timeout)
    else:
        send_webhook(sink, body, timeout)


@dataclass
class DeliveryStats:
    """What one ``deliver_due`` call did (counts of notifications)."""

    sent: int = 0
    retried: int = 0
    failed: int = 0
    deferred: int = 0


def deliver_due(ledger: Ledger, sinks: Sequence[Sink], *, budget_s: float = 2.0,
                now: float | None = None, limit: int = 20) -> DeliveryStats:
    """Send due ``pending`` notifications, spending at most about ``budget_s`` seconds.

    Each row is claimed (conditional update of ``next_attempt_at``) before sending, so two
    callers never send the same row at once. A sink's timeout is cut to the remaining budget;
    rows left when the budget is spent stay pending for the next call.
    """
    started = time.monotonic()
    ts = now if now is not None else time.time()
    by_name = {s.name: s for s in sinks}
    stats = DeliveryStats()
    due = [row_dict(r) for r in ledger.query(
        "SELECT * FROM notifications WHERE state = 'pending' AND next_attempt_at <= ?"
        " ORDER BY next_attempt_at, id LIMIT ?", (ts, int(limit)))]
    for n in due:
        assert n is not None
        remaining = budget_s - (time.monotonic() - started)
        if remaining <= 0.05:
            stats.deferred += 1
            continue
        claimed = ledger.write(lambda c, n=n: c.execute(
            "UPDATE notifications SET next_attempt_at = ? WHERE id = ? AND state = 'pending' AND next_attempt_at = ?",
            (ts + CLAIM_S, n["id"], n["next_attempt_at"])).rowcount == 1)
        if not claimed:
            continue
        sink = by_name.get(n["sink"])
        error: str | None = None
        if sink is None:
            error = f"sink {n['sink']!r} is not configured"
        else:
            try:
                send(sink, n["payload"], min(sink.timeout, max(0.1, remaining)))
            except RuntimeError as exc:
                error = str(exc)
        attempts = n["attempts"] + 1
        done = time.time()
        if error is None:
            ledger.write(lambda c, n=n, a=attempts, d=done: c.execute(
                "UPDATE notifications SET state = 'sent', attempts = ?, sent_at = ?, last_error = NULL WHERE id = ?",
                (a, d, n["id"])))
            stats.sent += 1
        elif attempts >= MAX_ATTEMPTS or sink is None:
            ledger.write(lambda c, n=n, a=attempts, e=error: c.execute(
                "UPDATE notifications SET state = 'failed', attempts = ?, last_error = ? WHERE id = ?",
                (a, e, n["id"])))
            stats.failed += 1
        else:
            ledger.write(lambda c, n=n, a=attempts, e=error, d=done: c.execute(
                "UPDATE notifications SET attempts = ?, last_error = ?, next_attempt_at = ? WHERE id = ?",
                (a, e, d + backoff_s(a), n["id"])))
            stats.retried += 1
    return stats


def summary(ledger: Ledger, since: float) -> dict[str, int]:
    """Counts of notifications created since ``since`` by state: ``{pending, sent, failed}``."""
    out = {"pending": 0, "sent": 0, "failed": 0}
    for r in ledger.query("SELECT state, COUNT(*) FROM notifications WHERE created_at >= ? GROUP BY state",
                          (since,)):
        out[r[0]] = int(r[1])
    return out
