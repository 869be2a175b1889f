"""Job specs in the ledger: the ``jobs`` table mirrors the spec folder.

``sync_jobs`` applies a ``LoadResult`` (from ``core.spec.loader.load_dir``) in one transaction:

* a new valid job is inserted (event ``spec_loaded``), a changed one updated
  (``spec_changed``), an unchanged one left alone;
* a job whose file is gone, or whose file now loads fine without it, is disabled
  (``enabled = 0``, event ``spec_removed``) — rows are never deleted, runs point at them;
* a job whose file has errors keeps its last good spec and stays enabled; the error is
  stored in ``jobs.last_error`` so the console can show it beside the job;
* every error is appended as an event of kind ``spec_error`` (``detail`` =
  ``SpecError.to_dict()``), which ``watchkeeper check --ledger`` and the console show;
* the load's errors are mirrored in ``invalid_specs`` (so a job whose file never parsed is
  listed too) with one ``spec_invalid`` escalation per job or file (``sync_invalid``).

An operator's pause lives here too (``jobs.paused_at``/``paused_by``/``pause_reason``):
``set_paused`` changes it (compare-and-set, audited), ``admit_slot`` is the scheduler's
question "may this slot run?".

Timestamps are Unix seconds (UTC).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.ledger import escalations
from core.ledger.connection import Conn, Ledger, Row, add_event
from core.ledger.page_records import SpecErrorEvent
from core.spec.loader import LoadedJob, LoadResult, SpecError
from core.spec.model import JobSpec, spec_from_json, spec_json
from core.text import iso, safe_text
from core.vocabulary import AuditEvent, EscalationKind

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    """What ``sync_jobs`` did, by job name."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: jobs whose file has errors: their last good spec stays in force
    kept: list[str] = field(default_factory=list)
    errors: list[SpecError] = field(default_factory=list)
    #: ``spec_invalid`` escalations opened (or reopened) and resolved, by subject
    invalid_opened: list[str] = field(default_factory=list)
    invalid_resolved: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _error_for(name: str, source: str, errors: list[SpecError]) -> SpecError | None:
    """The error that best explains why job ``name`` from ``source`` did not load."""
    in_file = [e for e in errors if e.file == source]
    for err in in_file:
        if err.job == name:
            return err
    return in_file[0] if in_file else None


def sync_jobs(ledger: Ledger, result: LoadResult, *, actor: str = "reload",
              now: float | None = None, sinks: Sequence[Any] = (), owner: str | None = None) -> SyncReport:
    """Apply a folder load to the ``jobs`` table and record ``events`` (one transaction).

    Also mirrors the load's errors into ``invalid_specs`` (one row per file and job name) and
    keeps one ``spec_invalid`` escalation open per invalid job (or per file, when the error
    names no job) until a load no longer reports it (``sync_invalid``).

    Args:
        ledger: an open, writable ledger.
        result: ``load_dir`` output of the whole folder; ``result.bad_files`` decides which
            missing jobs are kept (file has errors) and which are disabled (file gone or job
            removed).
        actor: recorded on every event (``reload``, ``runner:<id>``, ``cli``).
        now: Unix seconds for ``updated_at`` and event times; default the current time.
        sinks: notification sinks (``Settings.notify``) for ``spec_invalid`` escalations.
        owner: who a ``spec_invalid`` escalation goes to when the ledger knows no owner for
            the job (a job that never loaded).

    Returns:
        SyncReport with the names added, changed, removed, unchanged and kept.
    """
    at = time.time() if now is None else now

    def write(conn: Conn) -> SyncReport:
        rep = SyncReport(errors=list(result.errors))
        existing = {r["name"]: r for r in conn.execute(
            "SELECT name, spec_hash, source, enabled FROM jobs").fetchall()}
        for name, loaded in result.jobs.items():
            spec = loaded.spec
            values = (spec.kind, spec_json(spec), spec.spec_hash(), loaded.source, loaded.line,
                      spec.schedule_text(), spec.owner, spec.intent, at)
            row = existing.get(name)
            if row is None:
                conn.execute(
                    "INSERT INTO jobs (kind, spec, spec_hash, source, source_line, schedule_text, owner,"
                    " intent, updated_at, name, enabled, last_error) VALUES (?,?,?,?,?,?,?,?,?,?,1,NULL)",
                    (*values, name))
                add_event(conn, actor=actor, kind=AuditEvent.SPEC_LOADED, job=name, at=at,
                          reason=f"{loaded.source}:{loaded.line}",
                          detail={"source": loaded.source, "line": loaded.line, "spec_hash": spec.spec_hash()})
                rep.added.append(name)
                continue
            same = (row["spec_hash"] == spec.spec_hash() and row["enabled"] == 1
                    and row["source"] == loaded.source)
            conn.execute(
                "UPDATE jobs SET kind=?, spec=?, spec_hash=?, source=?, source_line=?, schedule_text=?,"
                " owner=?, intent=?, updated_at=?, enabled=1, last_error=NULL WHERE name=?",
                (*values, name))
            if same:
                rep.unchanged.append(name)
                continue
            add_event(conn, actor=actor, kind=AuditEvent.SPEC_CHANGED, job=name, at=at,
                      reason="re-enabled" if row["enabled"] != 1 else f"{loaded.source}:{loaded.line}",
                      detail={"source": loaded.source, "line": loaded.line, "old_hash": row["spec_hash"],
                              "spec_hash": spec.spec_hash()})
            rep.changed.append(name)
        for name, row in existing.items():
            if name in result.jobs or row["enabled"] != 1:
                continue
            source = row["source"]
            if source in result.bad_files and source and Path(source).exists():
                err = _error_for(name, source, result.errors)
                text = str(err) if err else f"{source}: has errors"
                conn.execute("UPDATE jobs SET last_error=?, updated_at=? WHERE name=?", (text, at, name))
                rep.kept.append(name)
                continue
            why = "file removed" if not source or not Path(source).exists() else "job removed from file"
            conn.execute("UPDATE jobs SET enabled=0, updated_at=? WHERE name=?", (at, name))
            add_event(conn, actor=actor, kind=AuditEvent.SPEC_REMOVED, job=name, at=at, reason=why,
                      detail={"source": source})
            rep.removed.append(name)
        for err in result.errors:
            add_event(conn, actor=actor, kind=AuditEvent.SPEC_ERROR, job=err.job, at=at, reason=str(err),
                      detail=err.to_dict())
        rep.invalid_opened, rep.invalid_resolved = sync_invalid(conn, result.errors, actor=actor, now=at,
                                                                sinks=sinks, owner=owner)
        return rep

    return ledger.write(write)


# -- invalid spec files (invalid_specs) ------------------------------------------------------

SPEC_INVALID = EscalationKind.SPEC_INVALID


def _invalid_key(err: SpecError) -> str:
    return f"{err.file}#{err.job or ''}"


def _subject(job: str | None, source: str) -> str:
    """What a ``spec_invalid`` escalation is about: the job name when the error names one,
    else the file (an unparseable file may define any number of jobs)."""
    return job or source


def sync_invalid(conn: Conn, errors: Sequence[SpecError], *, actor: str, now: float,
                 sinks: Sequence[Any] = (), owner: str | None = None) -> tuple[list[str], list[str]]:
    """Make ``invalid_specs`` hold exactly ``errors`` (the whole folder's load) and move the
    ``spec_invalid`` escalations with it. Call inside the writing transaction.

    One row per (file, job name); several errors for the same pair keep the first by line,
    with "(and N more)". A new row, or a row whose text changed, opens (or counts a repeat
    on) the subject's ``spec_invalid`` escalation, severity warning, owner the job's
    ``jobs.owner`` or ``owner``; an unchanged row is left alone, so a restart does not count
    again. A row no longer reported is deleted and, when no other row has the same subject,
    its escalation is resolved ("loads again", or "file removed").

    Returns:
        ``(subjects opened or repeated, subjects resolved)``.
    """
    current: dict[str, list[SpecError]] = {}
    for err in errors:
        if err.file:
            current.setdefault(_invalid_key(err), []).append(err)
    old = {r["key"]: dict(r) for r in conn.execute("SELECT * FROM invalid_specs").fetchall()}
    opened: list[str] = []
    for key, errs in current.items():
        first = min(errs, key=lambda e: (e.line is None, e.line or 0))
        text = str(first) + (f" (and {len(errs) - 1} more)" if len(errs) > 1 else "")
        conn.execute(
            "INSERT INTO invalid_specs (key, source, job, line, field, message, text, first_seen, last_seen)"
            " VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(key) DO UPDATE SET line = excluded.line,"
            " field = excluded.field, message = excluded.message, text = excluded.text,"
            " last_seen = excluded.last_seen",
            (key, first.file, first.job or "", first.line, first.field, first.message, text, now, now))
        if key in old and old[key]["text"] == text:
            continue
        subject = _subject(first.job, first.file)
        row = conn.execute("SELECT owner FROM jobs WHERE name = ?", (first.job,)).fetchone() if first.job else None
        kept = " (its last good spec still runs)" if row is not None else ""
        escalations.raise_escalation(
            conn, job=subject, kind=SPEC_INVALID, severity="warning", run_id=None,
            owner=(row["owner"] if row is not None and row["owner"] else owner), sinks=sinks, now=now,
            actor=actor, reason=f"spec does not load{kept}: {text}")
        opened.append(subject)
    resolved: list[str] = []
    still = {_subject(e.job, e.file) for errs in current.values() for e in errs}
    for key, row in old.items():
        if key in current:
            continue
        conn.execute("DELETE FROM invalid_specs WHERE key = ?", (key,))
        subject = _subject(row["job"], row["source"])
        if subject in still or subject in resolved:
            continue
        why = "loads again" if Path(row["source"]).exists() else "was removed"
        if escalations.auto_resolve(conn, subject, [SPEC_INVALID], run_id=None, sinks=sinks, now=now,
                                       actor=actor, reason=f"{safe_text(row['source'])} {why}"):
            resolved.append(subject)
    return opened, resolved


def load_jobs(ledger: Ledger) -> dict[str, JobSpec]:
    """Enabled jobs from the ``jobs`` table, name → spec. A stored spec that no longer
    validates (written by another version) is skipped with a warning, never raised."""
    return {name: job.spec for name, job in load_job_rows(ledger).items()}


def load_job_rows(ledger: Ledger) -> dict[str, LoadedJob]:
    """Enabled jobs from the ``jobs`` table with their source file and line (for
    ``core.spec.loader.resolve_cwd``), name → LoadedJob."""
    out: dict[str, LoadedJob] = {}
    for row in ledger.query("SELECT name, spec, source, source_line FROM jobs WHERE enabled=1 ORDER BY name"):
        try:
            spec = spec_from_json(row["spec"])
        except (ValidationError, ValueError) as exc:
            log.warning("job %s: stored spec does not validate, skipped: %s", row["name"], exc)
            continue
        out[row["name"]] = LoadedJob(spec, row["source"] or "", row["source_line"])
    return out


def recent_spec_errors(ledger: Ledger, limit: int = 50) -> list[SpecErrorEvent]:
    """The newest ``spec_error`` events (newest first), at most ``limit``, as
    ``SpecErrorEvent`` records: the ``SpecError`` fields as recorded, ``text`` formatted as
    ``file:line: job 'x': field 'f': message``. Reads the ``events`` table.
    """
    rows = ledger.query("SELECT id, at, actor, job, reason, detail FROM events WHERE kind = ?"
                        " ORDER BY id DESC LIMIT ?", (AuditEvent.SPEC_ERROR, int(limit)))
    out = []
    for r in rows:
        try:
            detail = json.loads(r["detail"]) if r["detail"] else {}
        except ValueError:
            detail = {}
        out.append(SpecErrorEvent(id=r["id"], at=r["at"], actor=r["actor"], job=r["job"],
                                  text=detail.get("text") or r["reason"], file=detail.get("file"),
                                  line=detail.get("line"), field=detail.get("field"),
                                  message=detail.get("message")))
    return out


# -- operator pause (jobs.paused_at / paused_by / pause_reason) ------------------------------

def _utc(ts: float | None) -> str:
    return iso(ts) or "?"


def _job_row(conn: Conn, job: str) -> Row | None:
    return conn.execute("SELECT name, enabled, paused_at, paused_by, pause_reason FROM jobs WHERE name = ?",
                        (job,)).fetchone()


def set_paused_in(conn: Conn, job: str, *, paused: bool, actor: str, reason: str | None = None,
                  now: float | None = None) -> tuple[dict[str, Any], bool] | None:
    """Inside a write transaction: pause or resume ``job`` (``jobs.paused_at``/``paused_by``/
    ``pause_reason``), with a ``job_paused`` / ``job_resumed`` event.

    The update is conditional on the pause state read (``paused_at IS NULL`` to pause,
    ``IS NOT NULL`` to resume), so of two operators acting at once one wins. Returns None when
    no enabled job has that name, else ``(the jobs row before, changed)``: ``changed`` is
    False, with nothing written, when the job was in the asked state already. ``now`` is Unix
    seconds (UTC). While paused, the scheduler skips the job's slots and records each as a
    ``slot_skipped_paused`` event (``admit_slot``); runs already queued or running are not
    touched, and a manual trigger still runs.
    """
    ts = time.time() if now is None else now
    got = conn.execute("SELECT * FROM jobs WHERE name = ?", (job,)).fetchone()
    if got is None or not got["enabled"]:
        return None
    row = {k: got[k] for k in got.keys()}
    if (row["paused_at"] is not None) == paused:
        return row, False
    if paused:
        conn.execute("UPDATE jobs SET paused_at = ?, paused_by = ?, pause_reason = ?"
                     " WHERE name = ? AND paused_at IS NULL", (ts, actor, reason, job))
    else:
        conn.execute("UPDATE jobs SET paused_at = NULL, paused_by = NULL, pause_reason = NULL"
                     " WHERE name = ? AND paused_at IS NOT NULL", (job,))
    who = actor.removeprefix("operator:")
    kind = AuditEvent.JOB_PAUSED if paused else AuditEvent.JOB_RESUMED
    detail: dict[str, Any] = {} if paused else {"paused_at": row["paused_at"], "paused_by": row["paused_by"],
                                                "paused_s": round(ts - row["paused_at"], 3)}
    add_event(conn, actor=actor, kind=kind, job=job, from_state="paused" if not paused else "active",
              to_state="paused" if paused else "active",
              reason=reason or f"{'paused' if paused else 'resumed'} by {who}", detail=detail, at=ts)
    return row, True


def last_resume(conn: Conn, job: str) -> dict[str, Any] | None:
    """The latest ``job_resumed`` event of ``job`` (an ``events`` row as a dict), or None."""
    row = conn.execute("SELECT * FROM events WHERE kind = ? AND job = ? ORDER BY id DESC LIMIT 1",
                       (AuditEvent.JOB_RESUMED.value, job)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}


def pause_of(conn: Conn, job: str) -> dict[str, Any] | None:
    """``{"paused_at" (Unix s), "paused_by" (actor), "pause_reason"}`` when ``job`` is paused,
    else None (also for an unknown job). From the ``jobs`` table."""
    row = _job_row(conn, job)
    if row is None or row["paused_at"] is None:
        return None
    return {"paused_at": row["paused_at"], "paused_by": row["paused_by"], "pause_reason": row["pause_reason"]}


def paused_jobs(ledger: Ledger, limit: int = 100) -> list[dict[str, Any]]:
    """Paused enabled jobs, longest paused first, at most ``limit``: ``[{"name", "paused_at"
    (Unix s), "paused_by" (actor), "pause_reason"}]``. From the ``jobs`` table."""
    rows = ledger.query("SELECT name, paused_at, paused_by, pause_reason FROM jobs WHERE paused_at IS NOT NULL"
                        " AND enabled = 1 ORDER BY paused_at, name LIMIT ?", (int(limit),))
    return [dict(r) for r in rows]


def admit_slot(conn: Conn, job: str, slot: str, *, actor: str, now: float | None = None) -> bool:
    """Inside the transaction that would queue a scheduled slot of ``job``: False when the
    job is paused, after appending a ``slot_skipped_paused`` event (``detail``: slot,
    paused_by, paused_at), so a skipped slot is never silent. True otherwise."""
    pause = pause_of(conn, job)
    if pause is None:
        return True
    by = str(pause["paused_by"] or "?").removeprefix("operator:")
    add_event(conn, actor=actor, kind=AuditEvent.SLOT_SKIPPED_PAUSED, job=job,
              reason=f"paused by {by} at {_utc(pause['paused_at'])}",
              detail={"slot": slot, **pause}, at=now)
    return False


def job_row(conn: Conn, name: str) -> dict[str, Any] | None:
    """The ``jobs`` row of ``name`` as a dict (``spec`` is the stored spec JSON), or None."""
    row = conn.execute("SELECT * FROM jobs WHERE name = ?", (name,)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}
def job_sources(ledger: Ledger) -> dict[str, str]:
    """``{job name: source file}`` of every enabled job in table ``jobs`` that has a source:
    which file owns a name when two files define it (the runner prefers the old owner)."""
    return {r["name"]: r["source"] for r in ledger.query(
        "SELECT name, source FROM jobs WHERE enabled = 1 AND source IS NOT NULL LIMIT 100000")}
