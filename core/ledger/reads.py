"""The console's read API: bounded pages of the ledger, never a whole table.

Every list function returns a ``Page``: at most ``limit`` typed rows (the records of
``core.ledger.page_records``, one per view) plus a keyset
cursor for the next page, so a 1,000,000-run ledger costs the same as a small one. Callers
hand the cursor back unchanged; it is an opaque tuple. All timestamps are float Unix
seconds (UTC); ``now`` arguments exist so tests can freeze time.

Reads only: writes belong to ``core.actions``, ``core.ledger.escalations`` and ``core.ledger.lifecycle``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from core import liveness
from core.ledger import hosts
from core.ledger import runners as status
from core.ledger.connection import Ledger, row_dict
from core.ledger.lifecycle import LIVE, TERMINAL
from core.ledger.page_records import (
    Attempt,
    ChildRun,
    EscalationBrief,
    EscalationDetail,
    EscalationEvent,
    HistoryRun,
    InvalidSpec,
    JobControls,
    JobHistory,
    JobInfo,
    JobRow,
    LiveRunRow,
    NotificationBrief,
    OutcomeRow,
    OutputSlice,
    RecentRun,
    RunBrief,
    RunDetail,
    RunEvidence,
    build,
)
from core.ledger.records import Escalation, Event, Outcome, Run, Runner
from core.text import short_age
from core.vocabulary import AuditEvent, BreakerState, RunState

#: Default rows per page: enough to fill a tall terminal several times over.
PAGE = 200
#: Bytes of each output stream shown in run detail (head and tail each).
OUTPUT_HEAD = 8 * 1024
OUTPUT_TAIL = 16 * 1024

_TERMINAL = tuple(sorted(str(s) for s in TERMINAL))
_LIVE = tuple(sorted(str(s) for s in LIVE))


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of rows.

    ``rows``: the view's records (``Escalation``, ``OutcomeRow``, ``LiveRunRow``, ``JobRow``).
    ``cursor``: pass to the same query's ``after`` to read the next page; None when this was
    the last page.
    """

    rows: list[T]
    cursor: tuple | None


@dataclass(frozen=True)
class Filter:
    """A parsed ``/`` filter: ``job:NAME state:S kind:K host:H`` tokens plus free text.

    ``state`` and ``kind`` match exactly (case-insensitive; ``kind:failed`` does not match
    ``verification_failed``; the console maps its display words to stored values first);
    ``job`` and free text are case-insensitive substrings; ``host`` is a hostname as
    recorded (runs spawned there; escalations of such runs and that host's ``host_down``).
    Empty means "any".
    """

    job: str = ""
    state: str = ""
    kind: str = ""
    host: str = ""
    text: str = ""
    raw: str = ""
    #: A column key of ``SORTS[view]`` to order by instead of the view's own order ("" none);
    #: ``desc``: that column descending. Not part of ``empty``: sorting narrows nothing.
    sort: str = ""
    desc: bool = False

    @property
    def empty(self) -> bool:
        return not (self.job or self.state or self.kind or self.host or self.text)


#: ``host:H`` on escalations: those of a run spawned on H, and H's own ``host_down``
#: (job ``(host H)``, ``core.ledger.hosts.host_job``).
_ESCALATION_HOST = ("(job = '(host ' || ? || ')' OR latest_run_id IN (SELECT id FROM runs WHERE host = ?))")

#: Filter fields matched exactly (stored states and kinds are closed-set words); the
#: console turns its own display words into these values first (``console.labels``).
EXACT_FIELDS = ("state", "kind")


def parse_filter(text: str | None) -> Filter:
    """Parse filter text such as ``job:backup state:failed disk full`` into a ``Filter``.

    Unknown ``key:value`` tokens and everything else become free text. Never raises
    (an unbalanced quote is taken literally).
    """
    text = (text or "").strip()
    if not text:
        return Filter()
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    parts: dict[str, str] = {"job": "", "state": "", "kind": "", "host": ""}
    free: list[str] = []
    for tok in tokens:
        key, sep, value = tok.partition(":")
        if sep and key.lower() in parts and value:
            parts[key.lower()] = value
        else:
            free.append(tok)
    return Filter(job=parts["job"], state=parts["state"], kind=parts["kind"], host=parts["host"],
                  text=" ".join(free), raw=text)


def _like(value: str) -> str:
    """A LIKE pattern matching ``value`` as a literal substring (escape char ``\\``)."""
    return "%" + re.sub(r"([%_\\])", r"\\\1", value) + "%"


def _where(flt: Filter | None, cols: dict[str, str], text_cols: list[str]) -> tuple[list[str], list[Any]]:
    """SQL conditions for a filter. ``cols`` maps filter field → column expression."""
    if flt is None or flt.empty:
        return [], []
    conds: list[str] = []
    params: list[Any] = []
    for name in ("job", "state", "kind"):
        value = getattr(flt, name)
        if value and name in cols and name in EXACT_FIELDS:
            # Exact, case-insensitive: stored states and kinds are lower-case words, so the
            # plain comparison keeps the column's index usable.
            value = value.lower()
            conds.append(f"{cols[name]} = ?")
            params.append(value)
        elif value and name in cols:
            conds.append(f"{cols[name]} LIKE ? ESCAPE '\\'")
            params.append(_like(value))
        elif value:
            conds.append("0")  # the view has no such field: nothing can match
    if flt.host and "host" in cols:  # a hostname as recorded; a view without hosts (jobs) ignores it
        conds.append(cols["host"])
        params.extend([flt.host] * cols["host"].count("?"))
    if flt.text:
        conds.append("(" + " OR ".join(f"COALESCE({c}, '') LIKE ? ESCAPE '\\'" for c in text_cols) + ")")
        params.extend([_like(flt.text)] * len(text_cols))
    return conds, params


# -- escalations ---------------------------------------------------------------------------

#: The columns each view can be sorted by (``Filter.sort``): column key → (SQL expression,
#: whether the column reads best descending first). Tie-break: the view's own order.
SORTS: dict[str, dict[str, tuple[str, bool]]] = {
    "escalations": {"severity": ("CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END", False),
                    "job": ("job", False), "kind": ("kind", False), "count": ("count", True),
                    "age": ("first_seen", False), "last": ("last_seen", True), "owner": ("owner", False),
                    "state": ("state", False)},
    "outcomes": {"job": ("r.job", False), "attempt": ("r.attempt", True), "state": ("r.state", False),
                 "duration": ("COALESCE(o.duration_s, r.ended_at - r.started_at)", True),
                 "exit": ("r.exit_code", True)},
    "jobs": {"name": ("name", False)},
}


def _sorted_by(view: str, flt: Filter | None) -> str | None:
    """``expr ASC|DESC`` for the filter's sort column of ``view``, None for the view's own order."""
    if flt is None or not flt.sort or flt.sort not in SORTS.get(view, {}):
        return None
    expr, _natural = SORTS[view][flt.sort]
    return f"{expr} {'DESC' if flt.desc else 'ASC'}"


_ESC_ORDER = (
    "CASE state WHEN 'open' THEN 0 WHEN 'acknowledged' THEN 1 WHEN 'snoozed' THEN 2 ELSE 3 END",
    "CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END",
    "-last_seen",
    "-id",
)


def escalations_page(ledger: Ledger, *, after: tuple | None = None, limit: int = PAGE,
                     flt: Filter | None = None, include_resolved: bool = True,
                     offset: int = 0) -> Page[Escalation]:
    """Escalations, open first, then by severity (critical first), newest ``last_seen`` first.

    ``offset`` skips that many rows after ``after`` (the console's Line-API view reads the
    page around what is visible by offset; sequential readers use the keyset cursor).

    Rows are ``Escalation`` records (``escalations`` rows). Filter fields: job, state, kind; free text also searches
    ``reason`` and ``owner``.
    """
    conds, params = _where(flt, {"job": "job", "state": "state", "kind": "kind", "host": _ESCALATION_HOST},
                           ["job", "kind", "reason", "owner", "severity", "state"])
    if not include_resolved:
        conds.append("state != 'resolved'")
    key = ", ".join(_ESC_ORDER)
    sort = _sorted_by("escalations", flt)
    if after is not None and sort is None:
        conds.append(f"({key}) > ({', '.join('?' * len(after))})")
        params.extend(after)
    where = ("WHERE " + " AND ".join(conds)) if conds else ""
    rows = ledger.rows(
        f"SELECT *, {_ESC_ORDER[0]} AS _k0, {_ESC_ORDER[1]} AS _k1 FROM escalations {where}"
        f" ORDER BY {sort + ', ' if sort else ''}{key} LIMIT ? OFFSET ?", (*params, limit, max(0, offset)))
    cursor = None
    if len(rows) == limit and sort is None:  # a sorted page is read by offset only
        last = rows[-1]
        cursor = (last["_k0"], last["_k1"], -last["last_seen"], -last["id"])
    return Page([Escalation.from_row(r) for r in rows], cursor)


def escalation(ledger: Ledger, esc_id: int) -> Escalation | None:
    """One ``escalations`` row as an ``Escalation``, or None when there is no such id."""
    row = ledger.row("SELECT * FROM escalations WHERE id = ?", (esc_id,))
    return None if row is None else Escalation.from_row(row)


#: ``events.kind`` of an escalation's audit trail: occurrences (opened, updated) and what
#: people and the supervisor did to it.
_ESC_OCCURRENCE = (AuditEvent.ESCALATION_OPENED, AuditEvent.ESCALATION_UPDATED)
_ESC_ACTS = (AuditEvent.ESCALATION_ACKNOWLEDGED, AuditEvent.ESCALATION_SNOOZED, AuditEvent.ESCALATION_RESOLVED,
             AuditEvent.ESCALATION_REOPENED)


def escalation_detail(ledger: Ledger, esc_id: int, *, limit: int = 200) -> EscalationDetail | None:
    """Everything the escalation detail screen shows (``EscalationDetail``), or None when
    there is no such id.

    ``escalation`` (the ``escalations`` row); ``occurrences`` (newest first, at most
    ``limit``: the ``escalation_opened`` / ``escalation_updated`` events with the run's
    columns from ``runs``); ``acts`` (acknowledge / snooze / resolve / reopen events, newest
    first); ``notifications`` (its ``notifications`` outbox rows, newest first);
    ``latest_run`` (the ``runs`` row of ``latest_run_id``, or None)."""
    esc = escalation(ledger, esc_id)
    if esc is None:
        return None
    kinds = _ESC_OCCURRENCE + _ESC_ACTS
    events = [build(EscalationEvent, r) for r in ledger.rows(
        "SELECT e.at, e.kind, e.actor, e.run_id, e.from_state, e.to_state, e.reason,"
        " CAST(json_extract(e.detail, '$.until') AS REAL) AS until, r.state AS run_state, r.exit_code, r.signal, r.attempt"
        f" FROM events e LEFT JOIN runs r ON r.id = e.run_id WHERE e.kind IN ({','.join('?' * len(kinds))})"
        " AND e.job = ? AND CAST(json_extract(e.detail, '$.escalation_id') AS INTEGER) = ? ORDER BY e.id DESC LIMIT ?",
        (*kinds, esc.job, esc_id, limit * 2))]
    occurrences = tuple([e for e in events if e.kind in _ESC_OCCURRENCE][:limit])
    acts = tuple([e for e in events if e.kind in _ESC_ACTS][:limit])
    notes = tuple(build(NotificationBrief, r) for r in ledger.rows(
        "SELECT id, event, sink, state, attempts, last_error, created_at, sent_at, next_attempt_at"
        " FROM notifications WHERE escalation_id = ? ORDER BY id DESC LIMIT ?", (esc_id, limit)))
    latest = None
    if esc.latest_run_id is not None:
        got = ledger.row("SELECT id, state, exit_code, signal, attempt FROM runs WHERE id = ?", (esc.latest_run_id,))
        latest = None if got is None else build(RunBrief, got)
    return EscalationDetail(escalation=esc, occurrences=occurrences, acts=acts, notifications=notes,
                            latest_run=latest)


# -- outcomes ------------------------------------------------------------------------------

_OUTCOME_COLS = (
    "r.id, r.job, r.task, r.lineage, r.attempt, r.state, r.trigger, r.host, r.started_at, r.ended_at, r.exit_code,"
    " r.signal, r.reason AS run_reason, o.status, o.duration_s, o.verdict_reason, o.verdict_kind,"
    " o.severity, o.silent, o.judged_by"
)


#: Offsets beyond this are skipped on the ``runs_ended`` index before the page is read.
_ANCHOR_FROM = 5000


def outcomes_page(ledger: Ledger, *, after: tuple | None = None, limit: int = PAGE,
                  flt: Filter | None = None, offset: int = 0) -> Page[OutcomeRow]:
    """Finished runs (``runs`` with ``ended_at`` set, left-joined with ``job_outcomes``),
    newest first by (ended_at, id), keyset-paged on the ``runs_ended`` index.

    Rows are ``OutcomeRow`` records (``duration_s``: the outcome's, else ended_at -
    started_at; ``reason``: the verdict's reason, else the run's). ``offset`` skips rows (it walks
    the ``runs_ended`` index: about 45 ms per 500,000 rows skipped).
    """
    conds, params = _where(flt, {"job": "r.job", "state": "r.state", "kind": "o.verdict_kind", "host": "r.host = ?"},
                           ["r.job", "r.state", "r.reason", "o.verdict_reason", "o.status"])
    conds.insert(0, "r.ended_at IS NOT NULL")
    sort = _sorted_by("outcomes", flt)
    if after is not None and sort is None:
        conds.append("(r.ended_at, r.id) < (?, ?)")  # row values: an index range, not a scan
        params.extend([after[0], after[1]])
    if offset > _ANCHOR_FROM and len(conds) == 1 and sort is None:
        # Skip on the covering index alone, then read the page from that row (a deep jump on
        # 1,000,000 runs: ~90 ms instead of ~340 ms with the join for every skipped row).
        anchor = ledger.one("SELECT ended_at, id FROM runs WHERE ended_at IS NOT NULL"
                            " ORDER BY ended_at DESC, id DESC LIMIT 1 OFFSET ?", (offset,))
        if anchor is None:
            return Page[OutcomeRow]([], None)
        conds.append("(r.ended_at, r.id) <= (?, ?)")
        params.extend([anchor[0], anchor[1]])
        offset = 0
    rows = ledger.rows(
        f"SELECT {_OUTCOME_COLS} FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
        f" WHERE {' AND '.join(conds)} ORDER BY {sort + ', ' if sort else ''}r.ended_at DESC, r.id DESC"
        " LIMIT ? OFFSET ?", (*params, limit, max(0, offset)))
    out = []
    for r in rows:
        took = r["duration_s"]
        if took is None and r["started_at"] is not None and r["ended_at"] is not None:
            took = r["ended_at"] - r["started_at"]
        out.append(build(OutcomeRow, r, duration_s=took, reason=r["verdict_reason"] or r["run_reason"] or ""))
    cursor = (out[-1].ended_at, out[-1].id) if len(out) == limit and sort is None else None
    return Page(out, cursor)


# -- live and orphaned runs ---------------------------------------------------------------

def orphans_page(ledger: Ledger, *, now: float, after: tuple | None = None, limit: int = PAGE,
                 flt: Filter | None = None, offset: int = 0) -> Page[LiveRunRow]:
    """Every live run (``spawned``, ``running``, ``verifying``), then orphaned runs: the
    console's "Live & orphans" view, where an operator can see and abandon any live run.

    Order: live runs at risk first (lease expired, or the owning runner stopped, silent for
    two heartbeats, or gone by ``core.liveness.runner_liveness`` — its process dead on this
    host), soonest-expired lease first; then the other live runs, newest first; then
    orphaned runs, newest first. Live runs are few (at most ``LIVE_MAX`` are listed) and come
    whole on the first page; later pages hold orphaned runs only, keyset on (ended_at, id).
    ``offset`` counts rows of that combined list (live rows first).

    Rows are ``LiveRunRow`` records (``lease_age_s`` and ``heartbeat_age_s`` in seconds at
    ``now``; ``risk``: why a live run is at risk, "" otherwise).
    """
    conds, params = _where(flt, {"job": "r.job", "state": "r.state", "host": "r.host = ?"},
                           ["r.job", "r.state", "r.reason"])
    extra = (" AND " + " AND ".join(conds)) if conds else ""
    offset = max(0, offset)
    out: list[LiveRunRow] = []
    skip = offset
    if after is None:
        live = live_runs(ledger, now=now, extra=extra, params=params)
        out.extend(live[offset:offset + limit])
        skip = max(0, offset - len(live))
    oconds = ["r.state = 'orphaned'"]
    oparams: list[Any] = []
    if after is not None:
        oconds.append("(r.ended_at, r.id) < (?, ?)")
        oparams.extend([after[0], after[1]])
    want = limit - len(out)
    orph: list[LiveRunRow] = []
    if want > 0:
        orphaned = ledger.query(
            f"SELECT {_ORPHAN_COLS} FROM runs r LEFT JOIN runners w ON w.id = r.runner_id"
            f" WHERE {' AND '.join(oconds)}{extra} ORDER BY r.ended_at DESC, r.id DESC LIMIT ? OFFSET ?",
            (*oparams, *params, want, skip))
        orph = [_live_row(r, now, at_risk=False, live=False, risk="") for r in orphaned]
    out.extend(orph)
    cursor = (orph[-1].ended_at, orph[-1].id) if orph and len(orph) == want else None
    return Page(out, cursor)


def _live_row(r: Any, now: float, **judged: Any) -> LiveRunRow:
    """A ``LiveRunRow`` from its columns, its ages taken at ``now``."""
    return build(LiveRunRow, r, **judged,
                 lease_age_s=None if r["lease_until"] is None else now - r["lease_until"],
                 heartbeat_age_s=None if r["heartbeat_at"] is None else now - r["heartbeat_at"])


def runs_in_flight(ledger: Ledger) -> int:
    """How many runs are live now (spawned, running or verifying in ``runs``): what stopping
    the runner would interrupt."""
    return int(ledger.scalar(f"SELECT COUNT(*) FROM runs WHERE state IN ({','.join('?' * len(_LIVE))})",
                             tuple(_LIVE)))


def live_runs(ledger: Ledger, *, now: float, extra: str = "", params: tuple | list = ()) -> list[LiveRunRow]:
    """Live runs (at most ``LIVE_MAX``, newest first read) judged at ``now``, at-risk ones
    first (see ``orphans_page``). ``extra``/``params``: filter conditions on ``runs r``."""
    rows = ledger.rows(
        f"SELECT {_ORPHAN_COLS}, r.created_at, w.id AS w_id, w.hostname AS w_hostname, w.boot_id AS w_boot_id,"
        " w.pid AS w_pid,"
        " w.pid_create_time AS w_pid_create_time, w.lease_s AS w_lease_s"
        f" FROM runs r LEFT JOIN runners w ON w.id = r.runner_id"
        f" WHERE r.state IN ({','.join('?' * len(_LIVE))}){extra} ORDER BY r.id DESC LIMIT ?",
        (*_LIVE, *params, LIVE_MAX))
    host = liveness.hostname()
    judged: dict[str, liveness.RunnerLiveness] = {}
    out: list[tuple[LiveRunRow, float]] = []
    for r in rows:
        w = {k[2:]: r.pop(k) for k in list(r) if k.startswith("w_")}
        risk = ""
        if r["lease_until"] is not None and r["lease_until"] < now:
            risk = "lease expired"
        elif w["id"] is not None:
            if w["id"] not in judged:
                judged[w["id"]] = liveness.runner_liveness(
                    Runner(id=w["id"], hostname=w["hostname"], boot_id=w["boot_id"], pid=w["pid"],
                           pid_create_time=w["pid_create_time"],
                           heartbeat_at=r["heartbeat_at"], lease_s=w["lease_s"], stopped_at=r["stopped_at"]),
                    now=now, this_host=host)
            if r["stopped_at"] is not None:
                risk = "runner stopped"
            elif judged[w["id"]] is liveness.RunnerLiveness.GONE:
                risk = "runner gone"
            elif r["heartbeat_at"] + 2 * r["heartbeat_s"] < now:
                risk = "runner silent"
        out.append((_live_row(r, now, at_risk=bool(risk), live=True, risk=risk), r["created_at"]))
    risky = sorted((x for x, _ in out if x.at_risk),
                   key=lambda x: (x.lease_until is None, x.lease_until or 0.0, x.id))
    healthy = sorted(((x, created) for x, created in out if not x.at_risk),
                     key=lambda xc: (-(xc[0].started_at or xc[1] or 0.0), -xc[0].id))
    return risky + [x for x, _ in healthy]


#: Most live runs listed (a handful in practice: at most the runners' concurrency).
LIVE_MAX = 1000
_ORPHAN_COLS = ("r.id, r.job, r.task, r.attempt, r.state, r.pid, r.host, r.runner_id, r.lease_until, r.started_at,"
                " r.ended_at, r.reason, w.heartbeat_at, w.heartbeat_s, w.stopped_at")


# -- jobs ----------------------------------------------------------------------------------

#: Lineages (a slot and its retries) counted for a job's success rate.
RATE_WINDOW = 20

#: Why a job's scheduled slots are held back (``job_next_run``'s second value).
HELD_PAUSED = "paused"
HELD_BREAKER = "breaker"


def job_next_run(ledger: Ledger, job: dict[str, Any], spec_text: str | None, now: float) -> tuple[float | None, str | None]:
    """(next_run, held) of one job: the one answer the CLI's ``jobs``, the Jobs view and the
    job history give.

    ``job``: its ``jobs`` row (name, enabled, paused_at, breaker_state, breaker_until);
    ``spec_text``: ``jobs.spec``. ``next_run`` (Unix s, or None): the earliest of a queued
    top-level run's ``not_before`` (a queued run still starts while the job is paused) and
    the next scheduled slot the runner will admit: none while paused; while the breaker is
    open, the first slot at or after ``breaker_until`` (the half-open trial); for a one-shot,
    its ``at`` until its run exists. ``held``: ``HELD_PAUSED``, ``HELD_BREAKER`` or None.
    """
    from core.spec.model import spec_from_json
    from core.spec.schedule import next_fire, once_slot

    at: float | None = None
    held: str | None = None
    if job.get("enabled"):
        try:
            spec = spec_from_json(spec_text) if spec_text else None
        except Exception:  # a stored spec this version cannot read: show no next run
            spec = None
        if job.get("paused_at") is not None:
            held = HELD_PAUSED
        elif spec is not None:
            after = now
            until = job.get("breaker_until")
            if job.get("breaker_state") == BreakerState.OPEN and until is not None and until > now:
                after, held = until - 1e-3, HELD_BREAKER
            at = next_fire(spec, after)
            once = once_slot(spec, now) if at is None else None
            if once is not None and ledger.one("SELECT 1 FROM runs WHERE job = ? AND slot = ? LIMIT 1",
                                               (job["name"], once[0])) is None:
                at = max(once[1], after)
    queued = ledger.one("SELECT MIN(not_before) FROM runs WHERE job = ? AND state = 'queued' AND task = ''",
                        (job["name"],))
    if queued and queued[0] is not None:
        at = queued[0] if at is None else min(at, queued[0])
    return at, held


class _Final(NamedTuple):
    """A finished attempt as the success rate counts it (``runs``)."""

    lineage: str
    attempt: int
    state: str


def lineage_success_rate(runs: Sequence[HistoryRun | _Final]) -> tuple[float | None, int]:
    """(rate 0..1 or None, lineages counted) over finished runs (records with ``lineage``,
    ``attempt`` and ``state``): each lineage (a slot and its retries) counts once, by its
    final attempt — succeeded (partial content included) or not. A failure retried to
    success is a success."""
    final: dict[str, HistoryRun | _Final] = {}
    for r in runs:
        got = final.get(r.lineage)
        if got is None or r.attempt > got.attempt:
            final[r.lineage] = r
    if not final:
        return None, 0
    return sum(1 for r in final.values() if r.state == RunState.SUCCEEDED) / len(final), len(final)


def jobs_page(ledger: Ledger, *, now: float, after: tuple | None = None, limit: int = PAGE,
              flt: Filter | None = None, offset: int = 0) -> Page[JobRow]:
    """Jobs by name with schedule, next run, last outcome and success rate.

    Rows are ``JobRow`` records: the ``jobs`` columns; next_run and next_held
    (``job_next_run``); last_state, last_ended_at (latest finished run), last_status (its
    ``job_outcomes.status``: ``partial`` for a run that succeeded with part of its work, None
    before judging); success_rate (``lineage_success_rate`` over the last ``RATE_WINDOW``
    lineages, each by its final attempt); recent_runs (the last ``RATE_WINDOW`` outcomes,
    every attempt, oldest first, for the Jobs view's sparkline) and their number ``recent``.

    Fan-out sub-task runs (``runs.task != ''``) are left out of next_run, last_state and
    success_rate: the parent run is the job's outcome.
    """
    conds, params = _where(flt, {"job": "name", "state": "breaker_state"},
                           ["name", "schedule_text", "owner", "intent"])
    desc = _sorted_by("jobs", flt) == "name DESC"
    if after is not None:
        conds.append("name < ?" if desc else "name > ?")
        params.append(after[0])
    where = ("WHERE " + " AND ".join(conds)) if conds else ""
    rows = ledger.rows(
        "SELECT name, kind, spec, schedule_text, owner, intent, enabled, breaker_state, breaker_until,"
        f" last_error, paused_at, paused_by, pause_reason FROM jobs {where} ORDER BY name {'DESC' if desc else ''}"
        " LIMIT ? OFFSET ?", (*params, limit, max(0, offset)))
    out: list[JobRow] = []
    for r in rows:
        next_run, next_held = job_next_run(ledger, r, r.get("spec"), now)
        last = ledger.one("SELECT r.state, r.ended_at, o.status FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
                          " WHERE r.job = ? AND r.task = '' AND r.ended_at IS NOT NULL ORDER BY r.id DESC LIMIT 1",
                          (r["name"],))
        recent = ledger.query(
            "SELECT o.status, r.state, o.duration_s FROM job_outcomes o JOIN runs r ON r.id = o.run_id"
            " WHERE o.job = ? AND r.task = '' ORDER BY o.run_id DESC LIMIT ?", (r["name"], RATE_WINDOW))
        finals = ledger.query(
            "SELECT r.lineage, r.attempt, r.state FROM runs r WHERE r.job = ? AND r.task = '' AND r.ended_at IS NOT NULL"
            " AND r.attempt = (SELECT MAX(x.attempt) FROM runs x WHERE x.lineage = r.lineage)"
            " ORDER BY r.id DESC LIMIT ?", (r["name"], RATE_WINDOW))
        out.append(build(
            JobRow, r, next_run=next_run, next_held=next_held,
            last_state=last["state"] if last else None, last_status=last["status"] if last else None,
            last_ended_at=last["ended_at"] if last else None, recent=len(recent),
            recent_runs=tuple(RecentRun(state=x["state"], status=x["status"], duration_s=x["duration_s"])
                              for x in reversed(recent)),
            success_rate=lineage_success_rate([_Final(x["lineage"], x["attempt"], x["state"]) for x in finals])[0]))
    cursor = (out[-1].name,) if len(out) == limit else None
    return Page(out, cursor)


#: Runs the job history screen reads (its chart, success rate and learned range).
HISTORY_RUNS = 50


def job_history(ledger: Ledger, job: str, *, now: float, limit: int = HISTORY_RUNS) -> JobHistory | None:
    """What the job history screen shows for ``job`` (``JobHistory``), or None when no
    ``jobs`` row has that name.

    ``job`` (the ``jobs`` row, plus ``timezone``: the spec's IANA zone or None for UTC),
    ``next_run`` and ``next_held`` (``job_next_run``), and ``runs``: its last ``limit``
    finished top-level runs, newest first (``duration_s``: the outcome's, else ended_at -
    started_at, seconds).
    """
    from core.spec.model import spec_from_json

    row = row_dict(ledger.one(
        "SELECT name, kind, spec, schedule_text, owner, intent, enabled, breaker_state, breaker_until, paused_at, paused_by,"
        " pause_reason, last_error FROM jobs WHERE name = ?", (job,)))
    if row is None:
        return None
    spec_text = row.pop("spec")
    zone = None
    try:
        zone = getattr(spec_from_json(spec_text), "timezone", None)
    except Exception:  # a stored spec this version cannot read
        pass
    nxt, held = job_next_run(ledger, row, spec_text, now)
    runs = [row_dict(r) for r in ledger.query(
        "SELECT r.id, r.lineage, r.attempt, r.state, r.trigger, r.started_at, r.ended_at, r.exit_code, r.signal, r.reason,"
        " o.status, o.verdict_reason, o.duration_s FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
        " WHERE r.job = ? AND r.task = '' AND r.ended_at IS NOT NULL ORDER BY r.ended_at DESC, r.id DESC LIMIT ?",
        (job, limit))]
    for r in runs:
        if r["duration_s"] is None and r["started_at"] is not None and r["ended_at"] is not None:
            r["duration_s"] = max(0.0, r["ended_at"] - r["started_at"])
    return JobHistory(job=build(JobInfo, row, timezone=zone), next_run=nxt, next_held=held,
                      runs=tuple(build(HistoryRun, r) for r in runs))


def job_controls(ledger: Ledger, job: str) -> JobControls | None:
    """The control state of one job from the ``jobs`` table (``JobControls``), or None when
    no row has that name. What a pause/resume/trigger dialog shows before asking."""
    row = ledger.row("SELECT name, enabled, paused_at, paused_by, pause_reason, breaker_state,"
                     " breaker_until, last_error FROM jobs WHERE name = ?", (job,))
    return None if row is None else build(JobControls, row)


def invalid_specs(ledger: Ledger, *, limit: int = PAGE, never_loaded: bool = False) -> list[InvalidSpec]:
    """Spec files the last folder load could not take (``InvalidSpec`` records of
    ``invalid_specs``), by file then line; ``loaded`` is True when an enabled ``jobs`` row
    has that name (its last good spec still runs).

    ``never_loaded=True`` keeps only the rows with no such job (a job that never parsed, or a
    file whose error names no job): what the Jobs view lists beside the jobs. All text is
    untrusted (from the spec file): show it through the escaper. At most ``limit`` rows.
    """
    sql = ("SELECT i.*, (j.name IS NOT NULL) AS loaded FROM invalid_specs i"
           " LEFT JOIN jobs j ON j.name = i.job AND i.job != '' AND j.enabled = 1")
    if never_loaded:
        sql += " WHERE j.name IS NULL"
    sql += " ORDER BY i.source, i.line, i.key LIMIT ?"
    return [build(InvalidSpec, r, loaded=bool(r["loaded"])) for r in ledger.rows(sql, (int(limit),))]


# -- row counts (scrollbar size) -----------------------------------------------------------

def count_rows(ledger: Ledger, view: str, *, now: float, flt: Filter | None = None) -> int:
    """How many rows ``view`` ("escalations", "outcomes", "orphans", "jobs") lists under ``flt``.

    Sizes the console's scrollbar. Unfiltered outcomes count walks the ``runs_ended`` index
    (about 35 ms per 1,000,000 runs); a free-text filter can take several hundred ms there, so
    the console counts on its own thread, once per filter and then only now and then, never on
    every poll.
    """
    if view == "escalations":
        conds, params = _where(flt, {"job": "job", "state": "state", "kind": "kind"},
                               ["job", "kind", "reason", "owner", "severity", "state"])
        where = ("WHERE " + " AND ".join(conds)) if conds else ""
        return int(ledger.scalar(f"SELECT COUNT(*) FROM escalations {where}", params))
    if view == "outcomes":
        conds, params = _where(flt, {"job": "r.job", "state": "r.state", "kind": "o.verdict_kind", "host": "r.host = ?"},
                               ["r.job", "r.state", "r.reason", "o.verdict_reason", "o.status"])
        join = " LEFT JOIN job_outcomes o ON o.run_id = r.id" if conds else ""
        conds.insert(0, "r.ended_at IS NOT NULL")
        return int(ledger.scalar(f"SELECT COUNT(*) FROM runs r{join} WHERE {' AND '.join(conds)}", params))
    if view == "orphans":
        conds, params = _where(flt, {"job": "r.job", "state": "r.state", "host": "r.host = ?"},
                           ["r.job", "r.state", "r.reason"])
        extra = (" AND " + " AND ".join(conds)) if conds else ""
        live = ledger.scalar(f"SELECT COUNT(*) FROM (SELECT 1 FROM runs r WHERE r.state IN ({','.join('?' * len(_LIVE))})"
                             f"{extra} LIMIT ?)", (*_LIVE, *params, LIVE_MAX))
        orph = ledger.scalar(f"SELECT COUNT(*) FROM runs r WHERE r.state = 'orphaned'{extra}", params)
        return int(live) + int(orph)
    if view == "jobs":
        conds, params = _where(flt, {"job": "name", "state": "breaker_state"},
                               ["name", "schedule_text", "owner", "intent"])
        where = ("WHERE " + " AND ".join(conds)) if conds else ""
        return int(ledger.scalar(f"SELECT COUNT(*) FROM jobs {where}", params))
    raise ValueError(f"unknown view {view!r}")


# -- run detail ----------------------------------------------------------------------------

def read_output(path: str | os.PathLike[str], head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL) -> dict[str, Any]:
    """Head and tail of one output file, decoded as UTF-8 with replacement.

    Returns ``{"exists", "size" (bytes), "head", "tail"}``; ``tail`` is "" when the head
    already covers the file. Never raises: an unreadable file reads as absent.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            first = fh.read(head)
            last = b""
            if size > head:
                fh.seek(max(head, size - tail))
                last = fh.read(tail)
    except OSError:
        return {"exists": False, "size": 0, "head": "", "tail": ""}
    return {"exists": True, "size": size, "head": first.decode("utf-8", "replace"),
            "tail": last.decode("utf-8", "replace")}


def run_detail(ledger: Ledger, run_id: int, *, events_limit: int = 500) -> RunDetail | None:
    """Everything the run detail screen shows (``RunDetail``), or None when there is no such run.

    ``run`` (the ``runs`` row), ``outcome`` (its ``job_outcomes`` record, JSON decoded, or
    None), ``attempts`` (all runs of the lineage, by attempt), ``events`` (audit trail of
    every attempt of the lineage, oldest first, at most ``events_limit``), ``stdout`` /
    ``stderr`` (``read_output`` of ``<artifacts_dir>/stdout.log`` / ``stderr.log``, falling
    back to the outcome's stored head and tail when the file is gone; plus ``total``: bytes
    the job wrote to the stream, the larger of the outcome's count and the file's size, so a
    run abandoned or orphaned before its output was counted does not read "0 bytes"),
    ``escalations`` (those naming this run as latest), ``children`` (fan-out sub-task runs
    whose ``parent_run_id`` is this run, by task then attempt).
    """
    got = ledger.row("SELECT * FROM runs WHERE id = ?", (run_id,))
    if got is None:
        return None
    run = Run.from_row(got)
    found = ledger.row("SELECT * FROM job_outcomes WHERE run_id = ?", (run_id,))
    outcome = None if found is None else Outcome.from_row(found)
    attempts = tuple(build(Attempt, r) for r in ledger.rows(
        "SELECT id, attempt, state, trigger, created_at, ended_at, exit_code, signal, reason FROM runs"
        " WHERE lineage = ? ORDER BY attempt LIMIT 1000", (run.lineage,)))
    ids = [a.id for a in attempts] or [run_id]
    events = tuple(Event.from_row(r) for r in ledger.rows(
        f"SELECT * FROM events WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY id LIMIT ?",
        (*ids, events_limit)))
    streams: dict[str, OutputSlice] = {}
    for name in ("stdout", "stderr"):
        got_out: dict[str, Any] = {"exists": False, "size": 0, "head": "", "tail": ""}
        if run.artifacts_dir:
            got_out = read_output(Path(run.artifacts_dir) / f"{name}.log")
        written = int(getattr(outcome, f"{name}_bytes", 0) or 0)
        if not got_out["exists"] and outcome is not None:
            got_out = {"exists": False, "size": written,
                       "head": getattr(outcome, f"{name}_head") or "",
                       "tail": getattr(outcome, f"{name}_tail") or ""}
        # A run settled by someone other than its capture (abandoned, orphaned) has an outcome
        # written before its output ended, counting 0 bytes; the file knows better. The file
        # never holds more than the job wrote, so the larger figure is the truer one.
        streams[name] = OutputSlice(exists=bool(got_out["exists"]), size=int(got_out["size"] or 0),
                                    head=str(got_out["head"]), tail=str(got_out["tail"]),
                                    total=max(written, int(str(got_out["size"] or 0))))
    escs = tuple(build(EscalationBrief, r) for r in ledger.rows(
        "SELECT id, kind, severity, state, count FROM escalations WHERE latest_run_id = ? LIMIT 20", (run_id,)))
    children = tuple(build(ChildRun, r) for r in ledger.rows(
        "SELECT id, task, attempt, state, exit_code, signal, reason, started_at, ended_at FROM runs"
        " WHERE parent_run_id = ? ORDER BY task, attempt, id LIMIT 1000", (run_id,)))
    return RunDetail(run=run, outcome=outcome, attempts=attempts, events=events, stdout=streams["stdout"],
                     stderr=streams["stderr"], escalations=escs, children=children)


def run_evidence(ledger: Ledger, run_id: int, tail_chars: int = 2000) -> RunEvidence | None:
    """The evidence of one finished run for a one-glance "why" (the console's preview line),
    from ``job_outcomes``: ``status``, ``verdict_reason``, and the last ``tail_chars``
    characters of stderr and stdout (``stderr_end`` / ``stdout_end``: the stored tail, else
    the head when the output was short). A run with no outcome (yet) is read from the files
    its monitor writes (``<artifacts_dir>/stdout.log``, ``stderr.log``), ``status`` and
    ``verdict_reason`` None; None when there is no outcome and no output file either."""
    row = ledger.one(
        "SELECT run_id, status, verdict_reason,"
        " substr(COALESCE(NULLIF(stderr_tail, ''), stderr_head, ''), -?) AS stderr_end,"
        " substr(COALESCE(NULLIF(stdout_tail, ''), stdout_head, ''), -?) AS stdout_end"
        " FROM job_outcomes WHERE run_id = ?", (tail_chars, tail_chars, run_id))
    if row is not None:
        return RunEvidence(run_id=row["run_id"], status=row["status"], verdict_reason=row["verdict_reason"],
                           stderr_end=row["stderr_end"] or "", stdout_end=row["stdout_end"] or "")
    run = ledger.one("SELECT artifacts_dir FROM runs WHERE id = ?", (run_id,))
    if run is None or not run["artifacts_dir"]:
        return None
    ends = {name: read_output(Path(run["artifacts_dir"]) / f"{name}.log", head=0, tail=tail_chars * 4)
            for name in ("stdout", "stderr")}
    if not any(e["exists"] for e in ends.values()):
        return None
    return RunEvidence(run_id=run_id, **{f"{name}_end": (e["head"] + e["tail"])[-tail_chars:]
                                         for name, e in ends.items()})


# -- header --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """The console header's figures.

    ``runner_up`` and ``runner_text``: see ``runner_status`` (the same liveness judgement as
    ``watchkeeper status``).
    ``open_by_severity``: open (not acknowledged/snoozed/resolved) escalations per severity.
    ``silent_share``: share (0..1) of the last ``SILENT_WINDOW`` judged outcomes the supervisor
    kept silent, None when nothing was judged. ``judged``: how many outcomes that share is over.
    """

    runner_up: bool
    runner_text: str
    open_by_severity: dict[str, int] = field(default_factory=dict)
    silent_share: float | None = None
    judged: int = 0


#: Judged outcomes the header's silent share is computed over (newest first).
SILENT_WINDOW = 1000


def runner_status(ledger: Ledger, now: float) -> tuple[bool, str]:
    """(up, text) for the header, judged as ``watchkeeper status`` judges it
    (``core.ledger.runners.runner_gap`` and ``core.liveness.runner_liveness``): up while a runner's
    heartbeat is fresh *and*, on this host, its process is alive, so a runner killed with
    SIGKILL shows as down at once rather than when its lease runs out. Texts: "runner up",
    "runner stalled for 40s" (heartbeat stale, process alive on this host), "runner stopped
    3m 5s ago" (a clean stop), "no runner for 7m" (since the last heartbeat of any runner),
    "no runner yet", and in a fleet "host db1 down" (a host whose runners all died while
    another's runs: ``core.ledger.hosts``). Cheap: the fresh ``runners`` rows, the newest few, one process check
    each; the console calls it on every poll."""
    gap = status.runner_gap(ledger, now=now)
    if gap is None:
        # A runner is up here or elsewhere; in a fleet a host whose runners all died is not
        # "up" for the one who looks at the header (as ``status`` says it on its first line).
        down = [h.name for h in hosts.fleet(ledger.conn, now=now) if not h.up and not h.stopped_cleanly]
        if down:
            return False, f"host {', '.join(down[:3])}{' …' if len(down) > 3 else ''} down"
        return True, "runner up"
    if gap.since is None:
        return False, "no runner yet"
    host = liveness.hostname()
    recent = ledger.rows(
        "SELECT * FROM runners WHERE stopped_at IS NULL ORDER BY heartbeat_at DESC LIMIT 5")
    for r in recent:
        if liveness.runner_liveness(Runner.from_row(r), now=now, this_host=host) is liveness.RunnerLiveness.STALLED:
            return False, f"runner stalled for {short_age(now - r['heartbeat_at'])}"
    last = ledger.one("SELECT heartbeat_at, stopped_at FROM runners ORDER BY heartbeat_at DESC LIMIT 1")
    if last is not None and last["stopped_at"] is not None:
        return False, f"runner stopped {short_age(now - last['stopped_at'])} ago"
    return False, f"no runner for {short_age(now - gap.since)}"


def summary(ledger: Ledger, now: float) -> Summary:
    """Header figures (see ``Summary``): runner status (``runner_status``), open escalation
    counts from ``escalations``, silent share from ``job_outcomes.silent``.

    The silent share covers the most recent judged outcomes only (``silent IS NOT NULL``,
    newest ``SILENT_WINDOW`` by run id), so its cost does not grow with the ledger.
    """
    up, text = runner_status(ledger, now)
    counts = {r["severity"]: r["n"] for r in ledger.query(
        "SELECT severity, COUNT(*) AS n FROM escalations WHERE state = 'open' GROUP BY severity LIMIT 10")}
    row = ledger.one("SELECT COUNT(*) AS n, SUM(silent) AS s FROM (SELECT silent FROM job_outcomes"
                     " WHERE silent IS NOT NULL ORDER BY run_id DESC LIMIT ?)", (SILENT_WINDOW,))
    judged = int(row["n"] or 0) if row else 0
    share = (float(row["s"] or 0) / judged) if row and judged else None
    return Summary(up, text, counts, share, judged)


def host_count(ledger: Ledger) -> int:
    """How many hosts the ledger's runners ran on (distinct ``runners.hostname``): from 2 the
    console's run tables show a Host column. The runners table is small (a row per start)."""
    row = ledger.one("SELECT COUNT(DISTINCT hostname) FROM runners")
    return int(row[0]) if row is not None and row[0] is not None else 0
