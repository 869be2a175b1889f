"""Retention: prune old runs with their outcomes, events, notifications and artifact folders.

What goes (``prune``): ended top-level runs (``runs.parent_run_id IS NULL`` in a terminal
state) older than ``max_age`` seconds, and — while the ledger plus artifacts exceed
``max_size`` bytes — the oldest further ones; each with its fan-out sub-tasks, its
``job_outcomes`` row, its ``events`` rows, and escalations that are resolved and cite it
(``escalations.latest_run_id``) together with their ``notifications``. Each run's artifact
folder is removed after its rows are gone.

A lineage (a run and its retries: one ``runs.lineage``) goes or stays whole: one attempt that
must stay keeps every attempt of its lineage, so ``doctor`` finds attempts 1..n after any
prune (a cited attempt 2 never loses its attempt 1).

What stays, whatever its age: the run holding the highest ``runs.id``, and the run an
escalation holding the highest ``escalations.id`` or ``notifications.id`` cites (with that
escalation and its notifications), so no id once shown to people is handed out again; a run
an active (not resolved) escalation cites (its latest run or any of its occurrences: ``escalation_opened``/``escalation_updated`` events); a worker run
of a mission still open; a run that has not ended, or whose sub-tasks have not; the newest ``keep_per_job`` ended top-level runs
of each job (the history ``core.supervisor.baseline`` learns a normal success from).

How: the candidates are found by a read-only walk up ``runs.id`` (``created_at`` grows with
the id, so the walk stops at the first run created after the age cutoff); each batch is one
short ``BEGIN IMMEDIATE`` transaction that re-checks every condition, deletes, and appends a
``runs_pruned`` audit event. The batch size adapts so each transaction stays near
``TARGET_TX_S``, and the lock is then left free at least as long as it was held, so a runner
sharing the ledger never waits longer than about one batch. Freed pages
go back to the file system with ``PRAGMA incremental_vacuum`` in small steps (ledgers created
by this version have ``auto_vacuum = INCREMENTAL``; an older one needs ``vacuum_full`` once).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from core.ledger.connection import Conn, Ledger, add_event
from core.ledger.lifecycle import TERMINAL
from core.vocabulary import MISSION_ENDED, AuditEvent, sql_set

log = logging.getLogger(__name__)

TERMINAL_VALUES = frozenset(s.value for s in TERMINAL)
TERMINAL_SQL = sql_set(TERMINAL_VALUES)
MISSION_ENDED_SQL = sql_set(MISSION_ENDED)
#: ``events.kind`` of an escalation's occurrences (each names its run in ``events.run_id``).
OCCURRENCE_SQL = sql_set([AuditEvent.ESCALATION_OPENED, AuditEvent.ESCALATION_UPDATED])
#: Aim for write transactions of about this many seconds (the issue's bound is ~50 ms).
TARGET_TX_S = 0.015
MIN_BATCH = 10
#: Least pause between two batches, seconds (see ``_batches``).
YIELD_MIN_S = 0.005
#: Rows read per step of the candidate walk (a read: it never blocks a writer in WAL mode).
WALK_PAGE = 2000
#: Most pages freed per ``incremental_vacuum`` step (4 KiB pages: 1 MiB); adapted down from there.
VACUUM_STEP_PAGES = 256
#: Most artifact folders named in ``PruneReport.artifacts_missing_names``.
MISSING_NAMED = 20
#: ``meta`` key holding the Unix time of the last completed prune.
LAST_PRUNE_KEY = "retention.last_prune_at"


@dataclass
class PruneReport:
    """What one prune did (or, with ``dry_run``, would do). Sizes in bytes, times in seconds."""

    dry_run: bool = False
    runs: int = 0                 # top-level runs removed
    subtasks: int = 0             # fan-out sub-task runs removed with them
    outcomes: int = 0
    events: int = 0
    escalations: int = 0          # resolved escalations citing a removed run
    notifications: int = 0
    artifact_dirs: int = 0        # removed (dry run: that would be removed)
    artifact_errors: list[str] = field(default_factory=list)
    artifacts_missing: int = 0    # removed runs whose artifacts folder was not there
    artifacts_missing_names: list[str] = field(default_factory=list)  # the first MISSING_NAMED of them
    # Why runs past the limits stay (top-level runs; see ``explain``):
    due: int = 0                  # past max_age, or picked for max_size
    kept_cited: int = 0           # an active escalation cites them
    kept_recent: int = 0          # among their job's newest keep_per_job
    kept_unfinished: int = 0      # not ended, or a sub-task of theirs has not
    kept_mission: int = 0         # a worker run of a mission still open
    kept_pinned: int = 0          # hold the highest runs/escalations/notifications id
    kept_lineage: int = 0         # another attempt of their lineage stays
    # The limits applied (for the explanation): seconds, bytes, runs.
    max_age: float | None = None
    max_size: int | None = None
    keep_per_job: int = 0
    batches: int = 0
    max_tx_s: float = 0.0         # longest delete transaction
    p99_tx_s: float = 0.0         # 99th percentile of the delete transactions
    size_before: int = 0          # ledger (+ WAL) and artifacts
    size_after: int = 0
    vacuumed_pages: int = 0
    max_vacuum_step_s: float = 0.0  # longest incremental_vacuum write
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _file_size(path: Path) -> int:
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(f"{path}{suffix}").st_size
        except OSError:
            pass
    return total


def dir_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (0 when it does not exist); never follows links."""
    total = 0
    stack = [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def total_size(ledger: Ledger, artifacts_dir: Path | None) -> int:
    """Ledger file plus WAL (on PostgreSQL: the database's size) plus the artifacts folder, bytes."""
    stored = (_file_size(ledger.path) if ledger.path is not None
              else int(ledger.scalar("SELECT pg_database_size(current_database())")))
    return stored + (dir_size(artifacts_dir) if artifacts_dir else 0)


def _kept_ids(conn: Conn, keep_per_job: int) -> dict[str, int]:
    """Per job, the id of its ``keep_per_job``-th newest ended top-level run: runs below it
    may go. A job with fewer ended runs is absent (nothing of it may go)."""
    limits: dict[str, int] = {}
    jobs = [r[0] for r in conn.execute("SELECT DISTINCT job FROM runs").fetchall()]
    for job in jobs:
        if keep_per_job == 0:
            limits[job] = 2**63 - 1
            continue
        row = conn.execute(
            f"SELECT id FROM runs WHERE job = ? AND parent_run_id IS NULL AND state IN {TERMINAL_SQL}"
            " ORDER BY id DESC LIMIT 1 OFFSET ?", (job, keep_per_job - 1)).fetchone()
        if row is not None:
            limits[job] = int(row[0])
    return limits


def _walk(conn: Conn, *, cutoff: float | None, size_runs: int, limits: dict[str, int],
          cited: set[int], mission: set[int], pinned: set[int],
          report: PruneReport) -> Iterator[tuple[int, str, str | None]]:
    """Candidate top-level runs oldest first, each as (id, lineage, artifacts folder).
    ``cutoff``: runs ended before it are due; ``size_runs``: so many further oldest runs are
    due. Each due run that must stay is counted in ``report`` under the reason it stays."""
    after = 0
    extra = size_runs
    while True:
        rows = conn.execute(
            "SELECT id, job, lineage, state, ended_at, created_at, artifacts_dir FROM runs"
            " WHERE id > ? AND parent_run_id IS NULL ORDER BY id LIMIT ?", (after, WALK_PAGE)).fetchall()
        if not rows:
            return
        for r in rows:
            after = r["id"]
            age_due = cutoff is not None and r["ended_at"] is not None and r["ended_at"] < cutoff
            if not age_due and extra <= 0:
                if cutoff is None or r["created_at"] >= cutoff:
                    return  # nothing older follows, and the size goal is met
                continue
            report.due += 1
            rid = int(r["id"])
            if r["state"] not in TERMINAL_VALUES:
                report.kept_unfinished += 1
            elif rid >= limits.get(r["job"], 0):
                report.kept_recent += 1
            elif rid in cited:
                report.kept_cited += 1
            elif rid in mission:
                report.kept_mission += 1
            elif rid in pinned:
                report.kept_pinned += 1
            else:
                if not age_due:
                    extra -= 1
                yield rid, r["lineage"], r["artifacts_dir"]


def _whole_lineages(conn: Conn, candidates: list[tuple[int, str, str | None]],
                    report: PruneReport) -> list[list[tuple[int, str | None]]]:
    """``candidates`` grouped into lineages, oldest first, keeping only the lineages all of
    whose top-level runs are candidates (the others stay whole: counted in
    ``report.kept_lineage``). Each group is a list of (run id, artifacts folder)."""
    groups: dict[str, list[tuple[int, str | None]]] = {}
    for rid, lineage, folder in candidates:
        groups.setdefault(lineage, []).append((rid, folder))
    ordered = [rid for rid, _, _ in candidates]
    ids = set(ordered)
    broken: set[str] = set()
    for i in range(0, len(ordered), WALK_PAGE):
        # The lineages are named through their runs' ids: the id list is what both backends
        # take as a JSON parameter.
        page = ordered[i:i + WALK_PAGE]
        broken.update(r["lineage"] for r in conn.execute(
            "SELECT o.id, o.lineage FROM runs o WHERE o.parent_run_id IS NULL AND o.lineage IN"
            " (SELECT r.lineage FROM runs r WHERE r.id IN (SELECT value FROM json_each(?)))",
            (json.dumps(page),)) if r["id"] not in ids)
    out = []
    for lineage, runs in groups.items():
        if lineage in broken:
            report.kept_lineage += len(runs)
        else:
            out.append(runs)
    out.sort(key=lambda g: g[0][0])
    return out


#: The row holding each table's highest id, per table whose ids people see (``runs``, and
#: ``escalations``/``notifications`` in mails and ``watchkeeper ack N``). Their ids are
#: ``INTEGER PRIMARY KEY`` without AUTOINCREMENT, so SQLite hands out max(id)+1: deleting the
#: highest row would give its number to the next new one, and an old mail's "Escalation: 11"
#: would then name a different item. Keeping that one row (and the run it hangs from) keeps
#: every number once given out unique.
_PINNED_SQL = (
    "SELECT COALESCE(parent_run_id, id) FROM runs WHERE id = (SELECT MAX(id) FROM runs)"
    " UNION SELECT COALESCE(r.parent_run_id, r.id) FROM runs r JOIN escalations e ON e.latest_run_id = r.id"
    " WHERE e.id = (SELECT MAX(id) FROM escalations)"
    " UNION SELECT COALESCE(r.parent_run_id, r.id) FROM runs r JOIN escalations e ON e.latest_run_id = r.id"
    " JOIN notifications n ON n.escalation_id = e.id WHERE n.id = (SELECT MAX(id) FROM notifications)")


def _pinned_runs(conn: Conn) -> set[int]:
    """Top-level run ids that must stay so the highest ``runs``, ``escalations`` and
    ``notifications`` ids stay taken (see ``_PINNED_SQL``)."""
    return {int(r[0]) for r in conn.execute(_PINNED_SQL).fetchall() if r[0] is not None}


def _delete_batch(conn: Conn, ids: list[int], *, actor: str, dry_run: bool) -> dict[str, Any]:
    """Delete runs ``ids`` (re-checked: still terminal, not cited, sub-tasks ended, and every
    other attempt of their lineage among them) and everything that belongs to them; returns
    counts and the ids actually removed."""
    pinned = _pinned_runs(conn)
    arr = json.dumps([i for i in ids if i not in pinned])
    rows = conn.execute(
        # "+r.state": the id list must drive the lookup; an index on state would scan every ended run.
        f"SELECT r.id, r.lineage FROM runs r WHERE r.id IN (SELECT value FROM json_each(?)) AND +r.state IN {TERMINAL_SQL}"
        " AND NOT EXISTS (SELECT 1 FROM escalations e WHERE e.latest_run_id = r.id AND e.state != 'resolved')"
        " AND NOT EXISTS (SELECT 1 FROM runs c JOIN escalations e ON e.latest_run_id = c.id"
        " AND e.state != 'resolved' WHERE c.parent_run_id = r.id)"
        " AND NOT EXISTS (SELECT 1 FROM events ev JOIN escalations e"
        " ON e.id = CAST(json_extract(ev.detail, '$.escalation_id') AS INTEGER) AND e.state != 'resolved'"
        f" WHERE ev.run_id = r.id AND ev.kind IN {OCCURRENCE_SQL})"
        " AND NOT EXISTS (SELECT 1 FROM mission_workers w JOIN missions m ON m.id = w.mission_id"
        f" WHERE w.run_id = r.id AND m.state NOT IN {MISSION_ENDED_SQL})"
        f" AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.id AND c.state NOT IN {TERMINAL_SQL})",
        (arr,)).fetchall()
    # A lineage goes whole or not at all: an attempt that stays keeps the others.
    passed = json.dumps([int(r["id"]) for r in rows])
    broken = {r[0] for r in conn.execute(
        "SELECT DISTINCT o.lineage FROM runs o WHERE o.parent_run_id IS NULL AND o.lineage IN"
        " (SELECT r.lineage FROM runs r WHERE r.id IN (SELECT value FROM json_each(?)))"
        " AND o.id NOT IN (SELECT value FROM json_each(?))", (passed, passed)).fetchall()}
    ok = [int(r["id"]) for r in rows if r["lineage"] not in broken]
    if not ok:
        return {"ids": [], "subtasks": 0, "outcomes": 0, "events": 0, "escalations": 0, "notifications": 0,
                "children": []}
    top = json.dumps(ok)
    children = [int(r[0]) for r in conn.execute(
        "SELECT id FROM runs WHERE parent_run_id IN (SELECT value FROM json_each(?))", (top,)).fetchall()]
    every = json.dumps(ok + children)
    esc = [int(r[0]) for r in conn.execute(
        "SELECT id FROM escalations WHERE state = 'resolved' AND latest_run_id IN (SELECT value FROM json_each(?))",
        (every,)).fetchall()]
    escs = json.dumps(esc)
    counts = {
        "outcomes": conn.execute("SELECT COUNT(*) FROM job_outcomes WHERE run_id IN (SELECT value FROM json_each(?))",
                                 (every,)).fetchone()[0],
        "events": conn.execute("SELECT COUNT(*) FROM events WHERE run_id IN (SELECT value FROM json_each(?))",
                               (every,)).fetchone()[0],
        "notifications": conn.execute(
            "SELECT COUNT(*) FROM notifications WHERE escalation_id IN (SELECT value FROM json_each(?))",
            (escs,)).fetchone()[0],
    }
    if not dry_run:
        conn.execute("DELETE FROM notifications WHERE escalation_id IN (SELECT value FROM json_each(?))", (escs,))
        conn.execute("DELETE FROM escalations WHERE id IN (SELECT value FROM json_each(?))", (escs,))
        conn.execute("DELETE FROM job_outcomes WHERE run_id IN (SELECT value FROM json_each(?))", (every,))
        conn.execute("DELETE FROM events WHERE run_id IN (SELECT value FROM json_each(?))", (every,))
        conn.execute("DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(children),))
        conn.execute("DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))", (top,))
        add_event(conn, actor=actor, kind=AuditEvent.RUNS_PRUNED, reason=f"{len(ok)} run(s) past retention",
                  detail={"runs": len(ok), "first": min(ok), "last": max(ok), "subtasks": len(children),
                          "events": counts["events"], "escalations": len(esc)})
    return {"ids": ok, "children": children, "subtasks": len(children), "escalations": len(esc), **counts}


def _remove_artifacts(run_id: int, recorded: str | None, root: Path | None, report: PruneReport, *,
                      dry_run: bool = False) -> None:
    # Only a folder named for the run inside the artifacts root: a hand-edited ledger must
    # never make prune delete anything else. A folder that is not there is counted and named
    # (moved, cleaned by hand, or a run that never started), never an error.
    if root is None:
        return
    folder = Path(recorded) if recorded else root / str(run_id)
    try:
        if folder.name != str(run_id) or folder.resolve().parent != root.resolve():
            return
        if not folder.is_dir():
            report.artifacts_missing += 1
            if len(report.artifacts_missing_names) < MISSING_NAMED:
                report.artifacts_missing_names.append(str(folder))
            return
        if not dry_run:
            shutil.rmtree(folder)
        report.artifact_dirs += 1
    except OSError as exc:
        report.artifact_errors.append(f"{folder}: {exc.strerror or exc}")


def _vacuum_step(conn: Conn, pages: int) -> None:
    # The pragma frees one page per step, and the sqlite3 module steps a statement without
    # result columns only once: so one call per page, all inside the caller's transaction.
    for _ in range(pages):
        conn.execute("PRAGMA incremental_vacuum(1)")


def incremental_vacuum(ledger: Ledger, *, max_steps: int = 100_000,
                       report: PruneReport | None = None) -> int:
    """Give free pages back to the file system in steps of at most ``VACUUM_STEP_PAGES``
    pages, each its own write (halved while a step takes longer than ``TARGET_TX_S``); then
    truncate the WAL. Returns pages freed (0 unless the ledger has ``auto_vacuum =
    INCREMENTAL``); ``report.max_vacuum_step_s`` gets the longest step."""
    if ledger.scalar("PRAGMA auto_vacuum") != 2:
        return 0
    freed = 0
    pages = 64
    for _ in range(max_steps):
        free = int(ledger.scalar("PRAGMA freelist_count"))
        if free <= 0:
            break
        t0 = time.perf_counter()
        ledger.write(partial(_vacuum_step, pages=min(free, pages)))
        took = time.perf_counter() - t0
        after = int(ledger.scalar("PRAGMA freelist_count"))
        if after >= free:
            break  # nothing more can be given back now (e.g. a reader pins the pages)
        if report is not None:
            report.max_vacuum_step_s = max(report.max_vacuum_step_s, took)
        if took > TARGET_TX_S * 1.2:
            pages = max(8, int(pages * TARGET_TX_S / took))
        elif took < TARGET_TX_S / 2:
            pages = min(VACUUM_STEP_PAGES, int(pages * 1.25) + 1)
        freed += free - after
        time.sleep(max(YIELD_MIN_S, took))  # as between delete batches: let waiting writers in
    # A checkpoint copies the WAL into the file; TRUNCATE then shrinks the WAL to zero.
    ledger._retry(lambda: ledger.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    return freed


def vacuum_full(ledger: Ledger) -> None:
    """Switch the ledger to ``auto_vacuum = INCREMENTAL`` and rebuild it (``VACUUM``): once,
    for a ledger created before retention existed. Blocks every writer while it runs."""
    ledger.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    ledger._retry(lambda: ledger.conn.execute("VACUUM"))


def prune(ledger: Ledger, *, max_age: float | None, max_size: int | None, keep_per_job: int,
          artifacts_dir: Path | None, batch: int = 200, dry_run: bool = False, actor: str = "retention",
          now: float | None = None, vacuum: bool = True,
          on_batch: Callable[[PruneReport], None] | None = None) -> PruneReport:
    """Prune runs past retention; see the module docstring for what goes and what stays.

    Args:
        max_age: seconds; ended runs older than this go. None: no age limit.
        max_size: bytes for ledger + WAL + artifacts; oldest runs go until an estimate of the
            size is under it. None: no size limit.
        keep_per_job: newest ended top-level runs kept per job.
        artifacts_dir: root of the per-run folders (``Settings.artifacts_dir``).
        batch: largest number of runs per transaction (adapted down to stay near ``TARGET_TX_S``).
        dry_run: count what would go, delete nothing (each batch still re-checks, then rolls back).
        now: Unix seconds (UTC) for the age cutoff.
    """
    started = time.monotonic()
    ts = time.time() if now is None else now
    report = PruneReport(dry_run=dry_run, size_before=total_size(ledger, artifacts_dir), max_age=max_age,
                         max_size=max_size, keep_per_job=keep_per_job)
    cutoff = ts - max_age if max_age is not None else None
    conn = ledger.conn
    limits = _kept_ids(conn, keep_per_job)
    # Every occurrence of an active escalation stays (its escalation_opened/_updated events
    # name the run), not only the latest: `escalations show` lists them all. A cited sub-task
    # keeps its parent (they go together).
    cited = {int(r[0]) for r in conn.execute(
        "SELECT COALESCE(r.parent_run_id, r.id) FROM runs r WHERE r.id IN ("
        "SELECT latest_run_id FROM escalations WHERE state != 'resolved' AND latest_run_id IS NOT NULL"
        " UNION SELECT ev.run_id FROM events ev JOIN escalations e"
        " ON e.id = CAST(json_extract(ev.detail, '$.escalation_id') AS INTEGER) AND e.state != 'resolved'"
        f" WHERE ev.kind IN {OCCURRENCE_SQL} AND ev.run_id IS NOT NULL)").fetchall()}
    mission = {int(r[0]) for r in conn.execute(
        "SELECT w.run_id FROM mission_workers w JOIN missions m ON m.id = w.mission_id"
        f" WHERE w.run_id IS NOT NULL AND m.state NOT IN {MISSION_ENDED_SQL}").fetchall()}
    size_runs = 0
    n_top = conn.execute("SELECT COUNT(*) FROM runs WHERE parent_run_id IS NULL").fetchone()[0] or 1
    if max_size is not None and report.size_before > max_size:
        # The ledger and the folders grow with runs about evenly: drop the share that is over.
        size_runs = math.ceil(n_top * (report.size_before - max_size) / report.size_before)
    if cutoff is None and size_runs == 0:
        report.size_after = report.size_before
        report.elapsed_s = time.monotonic() - started
        return report
    walked = list(_walk(conn, cutoff=cutoff, size_runs=size_runs, limits=limits, cited=cited, mission=mission,
                        pinned=_pinned_runs(conn), report=report))
    groups = _whole_lineages(conn, walked, report)
    # Checkpoints are done here between batches (PASSIVE: never waits for, nor blocks, a
    # writer) rather than inside a commit, so neither our batches nor the runner's next commit
    # pay for copying the pruned pages back into the file.
    conn.execute("PRAGMA wal_autocheckpoint=0")
    try:
        _batches(ledger, groups, artifacts_dir, report, batch=batch, actor=actor, dry_run=dry_run,
                 on_batch=on_batch)
    finally:
        conn.execute("PRAGMA wal_autocheckpoint=1000")

    if not dry_run:
        if vacuum:
            report.vacuumed_pages = incremental_vacuum(ledger, report=report)
        ledger.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key)"
                                         " DO UPDATE SET value = excluded.value", (LAST_PRUNE_KEY, repr(ts))))
        report.size_after = total_size(ledger, artifacts_dir)
    else:
        # The same even-growth estimate the size goal uses, for what the dry run would leave.
        report.size_after = report.size_before - report.size_before * report.runs // n_top
    report.elapsed_s = time.monotonic() - started
    return report


def _batches(ledger: Ledger, groups: list[list[tuple[int, str | None]]], artifacts_dir: Path | None,
             report: PruneReport, *, batch: int, actor: str, dry_run: bool,
             on_batch: Callable[[PruneReport], None] | None) -> None:
    """Delete ``groups`` (lineages, each a list of (run id, artifacts folder)) in write
    transactions sized to stay near ``TARGET_TX_S``, a lineage never split between two,
    adding to ``report``."""
    size = max(MIN_BATCH, min(batch, 50))  # start small, grow while transactions stay short
    times: list[float] = []
    i = 0
    while i < len(groups):
        chunk: list[tuple[int, str | None]] = []
        while i < len(groups) and (not chunk or len(chunk) + len(groups[i]) <= size):
            chunk.extend(groups[i])
            i += 1
        ids = [c[0] for c in chunk]
        began = [0.0]

        def tx(c: Conn, ids: list[int] = ids, began: list[float] = began) -> dict[str, Any]:
            began[0] = time.perf_counter()  # the write lock is held from here: waiting for it is not our cost
            return _delete_batch(c, ids, actor=actor, dry_run=dry_run)
        if dry_run:
            with ledger.read() as c:
                got = tx(c)
        else:
            got = ledger.write(tx)
        took = time.perf_counter() - began[0]
        report.max_tx_s = max(report.max_tx_s, took)
        times.append(took)
        report.batches += 1
        report.runs += len(got["ids"])
        for key in ("subtasks", "outcomes", "events", "escalations", "notifications"):
            setattr(report, key, getattr(report, key) + got[key])
        removed = set(got["ids"])
        for run_id, folder in chunk:
            if run_id in removed:
                _remove_artifacts(run_id, folder, artifacts_dir, report, dry_run=dry_run)
        for child in got["children"]:
            _remove_artifacts(child, None, artifacts_dir, report, dry_run=dry_run)
        # Grow gently and back off hard: one slow batch must not be followed by a slower one.
        if took > TARGET_TX_S * 1.2:
            size = max(MIN_BATCH, int(size * TARGET_TX_S / took))
        elif took < TARGET_TX_S / 2:
            size = min(batch, max(size + 1, int(size * 1.25)))
        if not dry_run:
            ledger.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            # Leave the lock free as long as we held it: a writer waiting in SQLite's busy
            # handler (sleeping, not queued) would otherwise lose every race to our next batch.
            time.sleep(max(YIELD_MIN_S, took))
        if on_batch is not None:
            on_batch(report)
    if times:
        times.sort()
        report.p99_tx_s = times[min(len(times) - 1, int(len(times) * 0.99))]


def last_prune_at(ledger: Ledger) -> float | None:
    """Unix seconds of the last completed prune (``meta``), or None."""
    row = ledger.one("SELECT value FROM meta WHERE key = ?", (LAST_PRUNE_KEY,))
    try:
        return float(row[0]) if row else None
    except (TypeError, ValueError):
        return None


def prune_due(ledger: Ledger, interval_s: float, *, now: float | None = None) -> bool:
    """True when no prune completed within the last ``interval_s`` seconds."""
    last = last_prune_at(ledger)
    ts = time.time() if now is None else now
    return last is None or ts - last >= interval_s


def prune_with(ledger: Ledger, retention: Any, artifacts_dir: Path | None, **kw: Any) -> PruneReport:
    """``prune`` with the fields of a ``core.spec.settings.RetentionSettings``."""
    return prune(ledger, max_age=retention.max_age, max_size=retention.max_size,
                 keep_per_job=retention.keep_per_job, artifacts_dir=artifacts_dir, batch=retention.batch, **kw)
