"""The ``notifications`` outbox: one row per (escalation event, sink that hears it), written in
the same transaction as the escalation change so nothing is lost across a crash. Delivery is
``core.supervisor.notify``'s job; this module writes, routes, shapes and reads rows.

Routing (per sink, see ``core.spec.settings``): a sink hears an escalation when its severity is
at least the sink's ``min_severity`` and, if the sink lists ``owners``, the escalation's owner
is one of them. Recovery notices go only to sinks with ``recovery = true`` that were told about
the escalation. A sink's ``group_wait`` (seconds) delays a new row so a burst is sent as one
message; its ``repeat`` (seconds) re-sends an open critical escalation nobody acknowledged.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from core import liveness
from core.ledger.connection import Conn, inserted_id
from core.ledger.records import Notification
from core.text import invisible, safe_text
from core.vocabulary import (
    SEVERITY_RANK,
    EscalationKind,
    EscalationState,
    NotificationEvent,
    NotificationState,
)

#: Evidence lines (the job's own last output lines) carried in a payload.
EVIDENCE_LINES = 5
EVIDENCE_LINE_CHARS = 300


def _ledger_path(conn: Conn) -> str | None:
    row = conn.execute("PRAGMA database_list").fetchone()
    return row[2] if row and row[2] else None


def open_command(run_id: int | None, ledger_path: str | None) -> str | None:
    """The shell command that shows run ``run_id`` (``watchkeeper show 42 --ledger PATH``)."""
    if run_id is None:
        return None
    cmd = f"watchkeeper show {int(run_id)}"
    return cmd + (f" --ledger {shlex.quote(ledger_path)}" if ledger_path else "")


def evidence(conn: Conn, run_id: int | None) -> list[str]:
    """The last non-blank output lines of run ``run_id`` (stderr first, else stdout) from
    ``job_outcomes`` (tail, or head for a short stream), each cut to ``EVIDENCE_LINE_CHARS`` characters; [] without a run."""
    out = output_lines(conn, run_id)
    return out["stderr"] or out["stdout"]


def output_lines(conn: Conn, run_id: int | None) -> dict[str, list[str]]:
    """``{"stdout": [...], "stderr": [...]}``: the last ``EVIDENCE_LINES`` non-blank lines of
    each stream of run ``run_id`` from ``job_outcomes`` (tail, or head for a short stream),
    each cut to ``EVIDENCE_LINE_CHARS`` characters, as stored (not yet escaped); empty lists
    without a run or an outcome."""
    out: dict[str, list[str]] = {"stdout": [], "stderr": []}
    if run_id is None:
        return out
    row = conn.execute("SELECT stdout_tail, stdout_head, stderr_tail, stderr_head FROM job_outcomes"
                       " WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return out
    # A short stream is all in its head (the tail is kept only past the head's size).
    for stream, text in (("stdout", row[0] or row[1]), ("stderr", row[2] or row[3])):
        lines = [ln.rstrip()[:EVIDENCE_LINE_CHARS] for ln in (text or "").splitlines() if ln.strip()]
        out[stream] = lines[-EVIDENCE_LINES:]
    return out


#: How a subject says what happened to a job: ``db-backup failed: …``, ``nightly timed out: …``.
#: A kind missing here is said with its own words (``new output shape``).
KIND_PHRASES: dict[str, str] = {
    EscalationKind.FAILED: "failed",
    EscalationKind.TIMED_OUT: "timed out",
    EscalationKind.ORPHANED: "was orphaned",
    EscalationKind.INTERRUPTED: "was interrupted",
    EscalationKind.VERIFICATION_FAILED: "failed verification",
    EscalationKind.BLOCKED: "is blocked",
    EscalationKind.RETRIES_EXHAUSTED: "failed, retries exhausted",
    EscalationKind.LATE_RESULT: "reported after it was declared dead",
    EscalationKind.RUNNER_GAP: "stopped",
    EscalationKind.HOST_DOWN: "is down",
    EscalationKind.JOB_REMOVED: "was removed with runs left",
    EscalationKind.FALSE_CLAIM: "claimed work it did not do",
    EscalationKind.SLOW: "ran slow",
    EscalationKind.TOO_FAST: "finished too fast",
    EscalationKind.OUTPUT_MISMATCH: "printed unexpected output",
    EscalationKind.LOW_CONFIDENCE: "reported low confidence",
    EscalationKind.PARTIAL: "delivered part of its work",
    EscalationKind.FLAPPING: "is flapping",
    EscalationKind.PARTIAL_CONTENT: "succeeded with partial content",
    EscalationKind.EMPTY_FILE: "wrote an empty file",
    EscalationKind.ZERO_WORK: "did no work",
    EscalationKind.FORBIDDEN_OUTPUT: "printed forbidden output",
    EscalationKind.SMALL_FILE: "wrote a small file",
    EscalationKind.SHRUNKEN_FILE: "wrote a shrunken file",
    EscalationKind.WORK_COUNT: "did less work than usual",
    EscalationKind.NEW_OUTPUT_SHAPE: "printed a new kind of output",
    EscalationKind.MISSING_OUTPUT: "printed none of its expected output",
    EscalationKind.INTENT_MISMATCH: "did not do what its intent says",
    EscalationKind.CIRCUIT_OPEN: "tripped its circuit breaker",
    EscalationKind.SPEC_INVALID: "has an invalid spec",
    EscalationKind.ESCAPED_PROCESSES: "left processes running",
    EscalationKind.MISSION_QUESTION: "asks a question",
    EscalationKind.MISSION_WORKER_FAILED: "has a failed worker",
    EscalationKind.MISSION_REPORT: "has a report to approve",
    EscalationKind.MISSION_BUDGET_EXHAUSTED: "ran out of budget",
    EscalationKind.MISSION_COORDINATOR_FAILED: "lost its coordinator",
}
#: Kinds whose job's own last output line says why better than the reason does.
_TOLD_BY_OUTPUT = frozenset({EscalationKind.FAILED, EscalationKind.RETRIES_EXHAUSTED, EscalationKind.TIMED_OUT,
                             EscalationKind.INTERRUPTED, EscalationKind.BLOCKED})
#: Longest headline (the part after the colon) in a subject.
HEADLINE_CHARS = 160


def what_happened(job: str, kind: str) -> str:
    """``db-backup failed``, ``nightly timed out``, ``runner stopped`` (a runner gap's job is
    ``(runner)``): the subject's sentence before its colon, not yet escaped."""
    phrase = KIND_PHRASES.get(kind, str(kind).replace("_", " "))
    return f"runner {phrase}" if job == "(runner)" else f"{job} {phrase}"


def headline(esc: dict[str, Any], evidence_lines: Sequence[str]) -> str:
    """The subject's words after the colon: the job's own last telling output line for a
    failure it told about (``backup: destination /mnt/backup is not mounted``), else the
    escalation's reason; cut to ``HEADLINE_CHARS``; "" when there is neither."""
    line = evidence_lines[-1].strip() if evidence_lines and esc.get("kind") in _TOLD_BY_OUTPUT else ""
    text = line or " ".join(str(esc.get("reason") or "").split())
    return text if len(text) <= HEADLINE_CHARS else text[:HEADLINE_CHARS - 1] + "…"


def payload_for(esc: dict[str, Any], event: str, *, host: str | None = None, ledger_path: str | None = None,
                lines: Sequence[str] = (), output: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """The JSON sent to sinks for escalation row ``esc`` and ``event``
    (opened | reopened | recovered | repeated).

    ``lines``: the telling output lines (``evidence``); ``output``: ``{"stdout": [...],
    "stderr": [...]}`` last lines of each stream (``output_lines``), default ``lines`` as stderr.
    ``title`` is a sentence (``[CRITICAL] db-backup failed: backup: destination /mnt/backup is
    not mounted``); ``text`` is one line (Slack-compatible); ``body`` is the plain-text
    message (the why, the job's stdout and stderr lines, host, run id, the command that opens
    the run). Every string field is escaped (``core.text.safe_text``, invisibles too).
    """
    sev = (esc.get("severity") or "info").upper()
    owner = esc.get("owner") or "unowned"
    host = host or liveness.hostname()
    run_id = esc.get("latest_run_id")
    count = esc.get("count", 1)
    show = open_command(run_id, ledger_path)
    streams = {"stdout": list((output or {}).get("stdout", ())),
               "stderr": list((output or {}).get("stderr", lines if output is None else ()))}
    said = what_happened(esc["job"], esc["kind"])
    if event == NotificationEvent.RECOVERED:
        title = f"[RECOVERED] {esc['job']} recovered ({said}, {count} occurrence(s))"
        text = title
    else:
        head = headline(esc, lines)
        tags: dict[str, str] = {NotificationEvent.REOPENED: f"[{sev}] again: ",
                                NotificationEvent.REPEATED: f"[{sev}] still not acknowledged: "}
        tag = tags.get(event, f"[{sev}] ")
        title = f"{tag}{said}" + (f": {head}" if head else "")
        text = f"{title} (escalation {esc['id']}, count {count}, owner {owner})"
    body = [title, ""]
    if esc.get("reason") and event != NotificationEvent.RECOVERED:
        body += [f"Why: {esc['reason']}", ""]
    if event != NotificationEvent.RECOVERED and (streams["stdout"] or streams["stderr"]):
        for stream in ("stdout", "stderr"):
            if streams[stream]:
                body += [f"Output ({stream}, last lines):"] + [f"  {ln}" for ln in streams[stream]]
        body.append("")
    body += [f"Host: {host}", f"Escalation: {esc['id']} ({esc['kind']}, count {count}, owner {owner})"]
    if run_id is not None:
        body.append(f"Run: {run_id}")
    if show:
        body.append(f"Open it: {show}")
    # Read by people in mail and chat: control, bidi and invisible characters from job output
    # or names are shown escaped (\x1b, \u202e), never passed on to act.
    title = safe_text(title, also=invisible)
    text = safe_text(text, also=invisible)
    body = [safe_text(line, also=invisible) for line in body]
    # The structured fields a sink's script reads (``jq -r .evidence[]``) get the same escaper:
    # JSON string escaping alone hands the raw ESC back to whoever decodes it.
    evidence_lines = [safe_text(line, also=invisible) for line in lines]
    reason = safe_text(esc["reason"], also=invisible) if esc.get("reason") is not None else None
    return {
        "text": text[:2000], "title": title[:250], "body": "\n".join(body)[:8000], "event": event,
        "escalation_id": esc["id"], "job": esc["job"], "kind": esc["kind"], "severity": esc.get("severity"),
        "state": esc.get("state"), "count": esc.get("count"), "owner": esc.get("owner"),
        "reason": reason, "first_seen": esc.get("first_seen"), "last_seen": esc.get("last_seen"),
        "latest_run_id": run_id, "run_id": run_id, "host": host, "open_command": show,
        "evidence": evidence_lines,
        "stdout": [safe_text(line, also=invisible) for line in streams["stdout"]],
        "stderr": [safe_text(line, also=invisible) for line in streams["stderr"]],
    }


def _hears(sink: Any, esc: dict[str, Any]) -> bool:
    hears = getattr(sink, "hears", None)
    return True if hears is None else bool(hears(esc.get("owner"), esc.get("severity")))


def _was_told(conn: Conn, esc_id: int, sink_name: str) -> bool:
    return conn.execute("SELECT 1 FROM notifications WHERE escalation_id = ? AND sink = ? AND event != 'recovered'"
                        " LIMIT 1", (esc_id, sink_name)).fetchone() is not None


def enqueue(conn: Conn, esc: dict[str, Any], event: str, sinks: Sequence[Any],
            *, now: float | None = None) -> list[int]:
    """Insert one ``pending`` notification per sink that hears ``esc`` (inside the caller's
    transaction); ``next_attempt_at`` is now plus the sink's ``group_wait`` seconds.

    Returns the new ``notifications`` ids (empty when no sink hears it).
    """
    ts = now if now is not None else time.time()
    chosen = []
    for sink in sinks:
        if event == NotificationEvent.RECOVERED:
            if not getattr(sink, "recovery", True) or not _was_told(conn, esc["id"], sink.name):
                continue
        elif not _hears(sink, esc):
            continue
        chosen.append(sink)
    if not chosen:
        return []
    out = output_lines(conn, esc.get("latest_run_id"))
    body = json.dumps(payload_for(esc, event, ledger_path=_ledger_path(conn), lines=out["stderr"] or out["stdout"],
                                  output=out), default=str)
    ids = []
    for sink in chosen:
        due = ts + float(getattr(sink, "group_wait", 0.0) or 0.0)
        cur = conn.execute("INSERT INTO notifications (escalation_id, event, sink, payload, state, attempts,"
                           " next_attempt_at, created_at) VALUES (?,?,?,?,'pending',0,?,?)",
                           (esc["id"], event, sink.name, body, due, ts))
        ids.append(inserted_id(cur))
    return ids


def enqueue_repeats(conn: Conn, sinks: Sequence[Any], *, now: float | None = None,
                    limit: int = 100) -> list[int]:
    """For each sink with ``repeat`` set: re-enqueue (event ``repeated``) every escalation in
    state ``open`` with severity ``critical`` that the sink was told about and whose newest row
    for that sink was created at least ``repeat`` seconds before ``now``. Call inside a write
    transaction. Returns the new ``notifications`` ids."""
    ts = now if now is not None else time.time()
    ids: list[int] = []
    for sink in sinks:
        every = getattr(sink, "repeat", None)
        if not every:
            continue
        rows = conn.execute(
            "SELECT e.*, MAX(n.created_at) AS last_at FROM escalations e"
            " JOIN notifications n ON n.escalation_id = e.id AND n.sink = ?"
            " WHERE e.state = 'open' AND e.severity = 'critical' GROUP BY e.id HAVING MAX(n.created_at) <= ?"
            " ORDER BY e.id LIMIT ?", (sink.name, ts - float(every), int(limit))).fetchall()
        for r in rows:
            esc = {k: r[k] for k in r.keys() if k != "last_at"}
            ids += enqueue(conn, esc, NotificationEvent.REPEATED, [sink], now=ts)
    return ids


def enqueue_owed(conn: Conn, sinks: Sequence[Any], *, now: float | None = None,
                 limit: int = 100) -> list[int]:
    """For each sink: enqueue (event ``opened``) every escalation in state ``open`` that the
    sink hears but has no ``notifications`` row for. Such an escalation was opened by a
    process that knew no sinks (``tail``, a console, ``sweep --ledger`` without settings);
    the next process that delivers (a runner, ``sweep --config``) pages it then. At most
    ``limit`` escalations per sink per call, oldest first. Call inside a write transaction.
    Returns the new ``notifications`` ids."""
    ts = now if now is not None else time.time()
    ids: list[int] = []
    for sink in sinks:
        # The sink's routing goes into the query, so escalations it never hears do not fill
        # the ``limit`` on every pass and hide newer ones (``_hears`` still has the last word).
        where, args = "", []
        floor = SEVERITY_RANK.get(str(getattr(sink, "min_severity", "") or ""), 0)
        if floor:
            heard = [sev for sev, rank in SEVERITY_RANK.items() if sev is not None and rank >= floor]
            where += " AND e.severity IN (SELECT CAST(value AS TEXT) FROM json_each(?))"
            args.append(json.dumps(heard))
        owners = list(getattr(sink, "owners", None) or [])
        if owners:
            where += " AND e.owner IN (SELECT CAST(value AS TEXT) FROM json_each(?))"
            args.append(json.dumps(owners))
        rows = conn.execute(
            "SELECT e.* FROM escalations e WHERE e.state = 'open' AND NOT EXISTS"
            " (SELECT 1 FROM notifications n WHERE n.escalation_id = e.id AND n.sink = ?)"
            f"{where} ORDER BY e.id LIMIT ?", (sink.name, *args, int(limit))).fetchall()
        for r in rows:
            esc = {k: r[k] for k in r.keys()}
            if _hears(sink, esc):
                ids += enqueue(conn, esc, NotificationEvent.OPENED, [sink], now=ts)
    return ids


def due(conn: Conn, now: float, limit: int) -> list[Notification]:
    """``pending`` notifications with ``next_attempt_at <= now``, oldest first."""
    rows = conn.execute("SELECT * FROM notifications WHERE state = 'pending' AND next_attempt_at <= ?"
                        " ORDER BY next_attempt_at, id LIMIT ?", (now, int(limit))).fetchall()
    return [Notification.from_row({k: r[k] for k in r.keys()}) for r in rows]


def fresh_for_sink(conn: Conn, sink: str, *, exclude: Sequence[int], limit: int = 50) -> list[Notification]:
    """``pending`` rows of ``sink`` never tried yet (``attempts = 0``) besides ``exclude``:
    the rest of a burst still inside its group_wait, sent in the same message."""
    rows = conn.execute("SELECT * FROM notifications WHERE state = 'pending' AND sink = ? AND attempts = 0"
                        " AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?",
                        (sink, json.dumps(list(exclude)), int(limit))).fetchall()
    return [Notification.from_row({k: r[k] for k in r.keys()}) for r in rows]


def cancel_stale_repeats(conn: Conn, rows: Sequence[Notification]) -> list[int]:
    """Of pending ``rows`` (as read), the ``repeated`` ones whose escalation is no longer
    ``open`` (acknowledged, snoozed or resolved since the row was queued) go to ``cancelled``
    with ``last_error`` saying why: a repeat nags about an unacknowledged escalation, so one
    sent after the ack would page for nothing. Call inside the write transaction that claims
    the rest. Returns the ids cancelled."""
    cancelled = []
    for r in rows:
        if r.event != NotificationEvent.REPEATED or r.escalation_id is None:
            continue
        row = conn.execute("SELECT state FROM escalations WHERE id = ?", (r.escalation_id,)).fetchone()
        state = row[0] if row is not None else "gone"
        if state == EscalationState.OPEN:
            continue
        if conn.execute("UPDATE notifications SET state = ?, last_error = ? WHERE id = ? AND state = 'pending'",
                        (NotificationState.CANCELLED, f"not sent: escalation {r.escalation_id} is {state}",
                         r.id)).rowcount == 1:
            cancelled.append(r.id)
    return cancelled


def cancel_stale_then_claim(conn: Conn, rows: Sequence[Notification],
                            until: float) -> tuple[list[int], list[int]]:
    """``cancel_stale_repeats`` then ``claim`` of the rest, in one transaction: an ack
    committed before it cancels the repeat, one committed after finds it claimed. Returns
    (ids cancelled, ids claimed)."""
    dropped = cancel_stale_repeats(conn, rows)
    return dropped, claim(conn, [r for r in rows if r.id not in dropped], until)


def claim(conn: Conn, rows: Sequence[Notification], until: float) -> list[int]:
    """Claim pending ``rows`` (as read) for one delivery: ``next_attempt_at = until``, each
    conditional on the value read, so of two processes exactly one sends a row. Returns the
    ids this caller won."""
    won = []
    for r in rows:
        if conn.execute("UPDATE notifications SET next_attempt_at = ? WHERE id = ? AND state = 'pending'"
                        " AND next_attempt_at = ?", (until, r.id, r.next_attempt_at)).rowcount == 1:
            won.append(r.id)
    return won


def mark_sent(conn: Conn, ids: Sequence[int], at: float) -> None:
    """``pending`` → ``sent`` for ``ids`` (``attempts + 1``, ``sent_at = at``)."""
    for i in ids:
        conn.execute("UPDATE notifications SET state = 'sent', attempts = attempts + 1, sent_at = ?,"
                     " last_error = NULL WHERE id = ? AND state = 'pending'", (at, i))


def mark_failed_try(conn: Conn, ids: Sequence[int], error: str, *, next_at: float | None) -> None:
    """One failed try for ``ids``: ``attempts + 1`` and ``last_error``; back to ``pending`` at
    ``next_at`` (Unix seconds), or ``failed`` for good when ``next_at`` is None."""
    for i in ids:
        if next_at is None:
            conn.execute("UPDATE notifications SET state = 'failed', attempts = attempts + 1, last_error = ?"
                         " WHERE id = ? AND state = 'pending'", (error, i))
        else:
            conn.execute("UPDATE notifications SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?"
                         " WHERE id = ? AND state = 'pending'", (error, next_at, i))


def summary(conn: Conn, since: float) -> dict[str, int]:
    """Counts of notifications created since ``since`` by state: ``{pending, sent, failed,
    cancelled}``."""
    out = {"pending": 0, "sent": 0, "failed": 0, "cancelled": 0}
    for r in conn.execute("SELECT state, COUNT(*) FROM notifications WHERE created_at >= ? GROUP BY state",
                          (since,)).fetchall():
        out[r[0]] = int(r[1])
    return out
