"""Notifications: an outbox in the ledger, delivered to sinks with retries and backoff.

Opening, reopening or recovering an escalation inserts one ``notifications`` row per sink
that hears it (``core.ledger.outbox`` routes by owner, severity and recovery opt-in), in the
same transaction as the escalation change, so nothing is lost across a crash. ``deliver_due``
(called from ``supervisor.periodic``) sends what is due within a time budget: ``pending`` →
``sent``, or back to ``pending`` with ``attempts + 1`` and ``next_attempt_at`` pushed out
exponentially, or ``failed`` after ``MAX_ATTEMPTS``. A restarted runner picks up the pending
rows. Rows of one sink that are due together, or still inside that sink's ``group_wait``,
go out as one message (a burst becomes one email); every row records its own delivery.

Sinks (``core.spec.settings``): ``CommandSink`` runs a program with the payload as JSON on
stdin; ``WebhookSink`` POSTs the payload as JSON (with a Slack-compatible ``text``) via
urllib; ``AppriseSink`` sends ``title`` and ``body`` as plain text to one Apprise URL
(email, Slack, Telegram, ntfy, Matrix, Discord, PagerDuty, ...).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core import liveness
from core.ledger.connection import Ledger
from core.ledger.outbox import enqueue, payload_for  # noqa: F401 (the outbox's face for callers)
from core.ledger.records import Notification
from core.ledger.sql_store import SqlStore
from core.processes import forget_child, signal_group, start_child
from core.spec.settings import AppriseSink, CommandSink, WebhookSink, apprise_log
from core.supervisor import notify_html
from core.text import invisible, safe_text
from core.vocabulary import NotificationEvent

MAX_ATTEMPTS = 8
BACKOFF_INITIAL_S = 5.0
BACKOFF_MAX_S = 3600.0
#: A claimed row is not picked again for this long (another runner's periodic may overlap).
CLAIM_S = 60.0
#: Most notifications folded into one grouped message.
GROUP_MAX = 50

Sink = CommandSink | WebhookSink | AppriseSink


def backoff_s(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` failed tries (5 s, 10 s, 20 s … ≤ 1 h)."""
    return min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** max(0, attempts - 1))


def send_command(sink: CommandSink, body: str, timeout: float) -> None:
    """Run the sink's program with ``body`` on stdin. Raises RuntimeError on failure/timeout."""
    try:
        proc = start_child(sink.command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise RuntimeError(f"cannot start {sink.command[0]}: {exc}") from None
    try:
        _, err = proc.communicate(body.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)  # its own session: the whole group goes
        proc.communicate()
        raise RuntimeError(f"timed out after {timeout:g}s") from None
    finally:
        forget_child(proc.pid)
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


def send_apprise(sink: AppriseSink, body: str, timeout: float) -> None:
    """Send the payload's ``title`` and ``body`` to the sink's Apprise URL: plain text, or the
    HTML layout of ``core.supervisor.notify_html`` (with Apprise's text rendering of it as the
    plain part) to a service that sends HTML, such as e-mail.

    Apprise reports failures through its log, not exceptions: the warnings logged during
    the call become the RuntimeError's message (and stay out of the process's own log, which
    would otherwise say each failure a second time).
    """
    import apprise  # lazy: only a configured apprise sink pays its import

    data = json.loads(body)
    ap = apprise.Apprise()
    with apprise_log():
        added = ap.add(sink.url)
    if not added:
        raise RuntimeError(f"sink {sink.name}: not a usable Apprise URL")
    for server in ap:  # the sink's timeout bounds connect and each read
        server.socket_connect_timeout = timeout
        server.socket_read_timeout = timeout
    # A service that sends HTML (e-mail) gets our layout: Apprise's own text-to-HTML turns
    # every space into &nbsp; and the message into one blob.
    if any(server.notify_format == apprise.NotifyFormat.HTML for server in ap):
        body, body_format = notify_html.render(data), apprise.NotifyFormat.HTML
    else:
        body, body_format = data.get("body") or data.get("text") or "", apprise.NotifyFormat.TEXT
    with apprise_log() as logs:
        ok = ap.notify(title=data.get("title") or "Watchkeeper", body=body, body_format=body_format)
    if not ok:
        lines = [ln for ln in logs.getvalue().splitlines() if ln.strip()]
        raise RuntimeError("; ".join(lines[-3:])[-300:] or "apprise delivery failed")


def send(sink: Sink, body: str, timeout: float) -> None:
    """Deliver one payload (JSON text, see ``core.ledger.outbox.payload_for``) to one sink.
    Raises RuntimeError on failure."""
    if isinstance(sink, CommandSink):
        send_command(sink, body, timeout)
    elif isinstance(sink, AppriseSink):
        send_apprise(sink, body, timeout)
    else:
        send_webhook(sink, body, timeout)


def group_payload(payloads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One message for several notifications of one sink: ``text`` counts them, ``body``
    holds each one's body in turn, ``notifications`` each one's payload."""
    if len(payloads) == 1:
        return dict(payloads[0])
    jobs = sorted({p.get("job") or "?" for p in payloads})
    worst = max((p.get("severity") or "info" for p in payloads),
                key=lambda s: {"info": 1, "warning": 2, "critical": 3}.get(s, 0))
    title = f"[{worst.upper()}] {len(payloads)} escalations: {', '.join(jobs)[:150]}"
    body = "\n\n".join(f"({i}) {p.get('body') or p.get('text')}" for i, p in enumerate(payloads, 1))
    return {"text": title + " - " + "; ".join(p.get("text", "") for p in payloads)[:1800], "title": title,
            "body": body[:30000], "event": "grouped", "count": len(payloads), "host": payloads[0].get("host"),
            "notifications": list(payloads)}


def test_payload(sink_name: str, *, host: str | None = None, operator: str | None = None) -> dict[str, Any]:
    """The payload ``watchkeeper notify test`` sends to sink ``sink_name``: the fields of a
    real one (``core.ledger.outbox.payload_for``: ``title``, ``text``, ``body``, ``stdout``,
    ``stderr`` …) with ``event = "test"``, severity ``info`` and no escalation or run, so a
    sink's script and an e-mail's layout are checked as they will be used."""
    host = host or liveness.hostname()
    title = safe_text(f"[TEST] Watchkeeper notification test: sink {sink_name!r} on {host}", also=invisible)
    who = f" by {operator}" if operator else ""
    reason = (f"A test sent{who} with `watchkeeper notify test`: if you read this, sink {sink_name!r} delivers."
              " No job failed.")
    stdout = ["this is how a job's last stdout lines appear"]
    stderr = ["and this is how its last stderr lines appear"]
    body = [title, "", f"Why: {reason}", "", "Output (stdout, last lines):", *[f"  {ln}" for ln in stdout],
            "Output (stderr, last lines):", *[f"  {ln}" for ln in stderr], "", f"Host: {host}"]
    return {"text": title, "title": title, "body": "\n".join(safe_text(ln, also=invisible) for ln in body),
            "event": NotificationEvent.TEST, "escalation_id": None, "job": None, "kind": None, "severity": "info",
            "state": None, "count": None, "owner": None, "reason": safe_text(reason, also=invisible),
            "first_seen": None, "last_seen": None, "latest_run_id": None, "run_id": None, "host": host,
            "open_command": None, "evidence": stderr, "stdout": stdout, "stderr": stderr}


@dataclass
class DeliveryStats:
    """What one ``deliver_due`` call did (counts of notifications, not messages)."""

    sent: int = 0
    retried: int = 0
    failed: int = 0
    deferred: int = 0
    messages: int = 0
    cancelled: int = 0  # repeats dropped: their escalation was acknowledged, snoozed or resolved since


def deliver_due(ledger: Ledger, sinks: Sequence[Sink], *, budget_s: float = 2.0,
                now: float | None = None, limit: int = 20) -> DeliveryStats:
    """Send due ``pending`` notifications, spending at most about ``budget_s`` seconds.

    Due rows are grouped per sink, joined by that sink's fresh rows still inside their
    group_wait, and sent as one message. Rows are claimed (conditional update of
    ``next_attempt_at``) before sending, so two callers never send the same row at once. A
    sink's timeout is cut to the remaining budget; rows left when the budget is spent stay
    pending for the next call.
    """
    started = time.monotonic()
    ts = now if now is not None else time.time()
    by_name = {s.name: s for s in sinks}
    stats = DeliveryStats()
    store = SqlStore(ledger)
    due = store.due_notifications(ts, limit=limit)
    # A sink with a group_wait gets one message for all its due rows; others one per row.
    grouped: dict[str, list[Notification]] = {}
    batches: list[tuple[str, list[Notification]]] = []
    for n in due:
        if getattr(by_name.get(n.sink), "group_wait", 0):
            if n.sink not in grouped:
                grouped[n.sink] = []
                batches.append((n.sink, grouped[n.sink]))
            grouped[n.sink].append(n)
        else:
            batches.append((n.sink, [n]))
    for sink_name, rows in batches:
        remaining = budget_s - (time.monotonic() - started)
        if remaining <= 0.05:
            stats.deferred += len(rows)
            continue
        sink = by_name.get(sink_name)
        if sink_name in grouped:
            rows = rows + store.fresh_notifications(sink_name, exclude=[r.id for r in rows], limit=GROUP_MAX)
        rows = rows[:GROUP_MAX]
        dropped, claimed = store.claim_notifications(rows, until=ts + CLAIM_S)
        stats.cancelled += len(dropped)
        won = set(claimed)
        rows = [r for r in rows if r.id in won]
        if not rows:
            continue
        ids = [r.id for r in rows]
        error: str | None = None
        if sink is None:
            error = f"sink {sink_name!r} is not configured"
        else:
            payloads = [r.payload for r in rows]
            body = json.dumps(group_payload(payloads), default=str)
            try:
                send(sink, body, min(sink.timeout, max(0.1, remaining)))
            except RuntimeError as exc:
                error = str(exc)
            stats.messages += 1
        done = time.time()
        if error is None:
            store.mark_notifications_sent(ids, at=done)
            stats.sent += len(ids)
            continue
        # Rows of one message may have different histories: each backs off on its own count.
        for r in rows:
            attempts = r.attempts + 1
            final = attempts >= MAX_ATTEMPTS or sink is None
            store.mark_notification_failed([r.id], error=error or "",
                                           next_at=None if final else done + backoff_s(attempts))
            if final:
                stats.failed += 1
            else:
                stats.retried += 1
    return stats


def repeat_unacknowledged(ledger: Ledger, sinks: Sequence[Sink], *, now: float | None = None) -> int:
    """Re-enqueue open critical escalations nobody acknowledged, per sink ``repeat`` seconds
    (``core.ledger.outbox.enqueue_repeats``). Returns how many notifications were added."""
    if not any(getattr(s, "repeat", None) for s in sinks):
        return 0
    return SqlStore(ledger).enqueue_repeats(sinks, now=now)


def enqueue_owed(ledger: Ledger, sinks: Sequence[Sink], *, now: float | None = None) -> int:
    """Page open escalations no sink was told about yet (opened by a process without sinks,
    see ``core.ledger.outbox.enqueue_owed``). Returns how many notifications were added."""
    if not sinks:
        return 0
    return SqlStore(ledger).enqueue_owed(sinks, now=now)


def summary(ledger: Ledger, since: float) -> dict[str, int]:
    """Counts of notifications created since ``since`` by state: ``{pending, sent, failed}``."""
    return SqlStore(ledger).notification_counts(since)
