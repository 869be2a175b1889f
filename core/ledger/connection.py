"""The SQLite ledger: the single source of truth about jobs, runs, outcomes and escalations.

Opened through sqlite-utils on a plain ``sqlite3`` connection (same-thread only: open a
``Ledger`` in the thread that uses it). WAL journal, ``synchronous=NORMAL``,
``busy_timeout``, foreign keys on, schema version in ``PRAGMA user_version`` with forward
migrations. The database file is created with mode 0600.

All timestamps are Unix seconds (UTC) stored as REAL. All state changes of runs go through
``core.ledger.lifecycle``; this module only provides connections, transactions and the schema.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from core.ledger import dialect
from core.text import quoted
from core.vocabulary import AuditEvent

if TYPE_CHECKING:  # imported when ``Ledger.db`` is first asked for: it costs every process ~0.1 s of CPU
    import sqlite_utils

log = logging.getLogger(__name__)
#: A log record attribute: a warning an operator must see even without ``-v`` (the ledger
#: lost and back: one line each, however long the outage). The CLI's stderr handler lets
#: such records through at its default errors-only level.
OPERATOR_LINE = "operator_line"
T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT_MS = 5000

# Forward migrations: index i upgrades user_version i → i+1. Never edit a released entry.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE jobs (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL DEFAULT 'command',
        spec TEXT NOT NULL,              -- validated spec as JSON
        spec_hash TEXT NOT NULL,
        source TEXT,                     -- file the spec came from
        source_line INTEGER,
        schedule_text TEXT,              -- cron expression / "every 30s" / "once"
        owner TEXT,
        intent TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        breaker_state TEXT NOT NULL DEFAULT 'closed',  -- closed | open | half_open
        breaker_until REAL,
        breaker_opened_at REAL,
        last_error TEXT,                 -- last spec error for this job (kept spec still applies)
        updated_at REAL NOT NULL
    );
    CREATE TABLE runners (
        id TEXT PRIMARY KEY,
        hostname TEXT NOT NULL,
        pid INTEGER NOT NULL,
        pid_create_time REAL,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        heartbeat_s REAL NOT NULL,
        lease_s REAL NOT NULL,
        stopped_at REAL,
        stop_reason TEXT,
        version TEXT
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        job TEXT NOT NULL,
        lineage TEXT NOT NULL,           -- all attempts of one slot share it
        attempt INTEGER NOT NULL,
        state TEXT NOT NULL,
        slot TEXT NOT NULL,              -- dedup key: scheduled slot ISO time, 'once', or 'manual:<id>'
        task TEXT NOT NULL DEFAULT '',   -- fan-out sub-task name ('' for ordinary runs)
        trigger TEXT NOT NULL,           -- schedule | manual | retry | misfire | fanout
        worker TEXT NOT NULL DEFAULT 'primary',  -- primary | fallback
        parent_run_id INTEGER REFERENCES runs(id),
        spec_hash TEXT,
        not_before REAL NOT NULL,
        created_at REAL NOT NULL,
        spawned_at REAL,
        started_at REAL,
        ended_at REAL,
        updated_at REAL NOT NULL,
        pid INTEGER,
        pid_create_time REAL,
        pgid INTEGER,
        runner_id TEXT REFERENCES runners(id),
        lease_until REAL,
        exit_code INTEGER,
        signal INTEGER,
        reason TEXT,
        artifacts_dir TEXT,
        UNIQUE (job, slot, task, attempt)
    );
    CREATE INDEX runs_state ON runs(state, not_before);
    CREATE INDEX runs_job ON runs(job, id);
    CREATE INDEX runs_lineage ON runs(lineage, attempt);
    CREATE INDEX runs_ended ON runs(ended_at, id);
    CREATE INDEX runs_parent ON runs(parent_run_id);
    CREATE TABLE job_outcomes (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        job TEXT NOT NULL,
        lineage TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        state TEXT NOT NULL,             -- terminal run state
        status TEXT NOT NULL,            -- success | failed | partial | blocked | timed_out | orphaned | abandoned
        reason TEXT,
        duration_s REAL,
        exit_code INTEGER,
        signal INTEGER,
        stdout_bytes INTEGER NOT NULL DEFAULT 0,
        stderr_bytes INTEGER NOT NULL DEFAULT 0,
        output_truncated INTEGER NOT NULL DEFAULT 0,
        stdout_head TEXT, stdout_tail TEXT, stderr_head TEXT, stderr_tail TEXT,
        handoff_raw TEXT,                -- verbatim (decoded with replacement), capped
        handoff TEXT,                    -- validated handoff as JSON, NULL when absent/invalid
        handoff_findings TEXT,           -- JSON list of {code, message}
        verification TEXT,               -- JSON {ok, checks: [...]}
        verdict TEXT,                    -- JSON supervisor verdict
        escalate INTEGER,
        severity TEXT,
        verdict_kind TEXT,
        verdict_reason TEXT,
        silent INTEGER,
        judged_by TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX outcomes_job ON job_outcomes(job, run_id);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        run_id INTEGER,
        job TEXT,
        attempt INTEGER,
        actor TEXT NOT NULL,             -- runner:<id> | sweep | supervisor | operator:<name> | reload | cli
        kind TEXT NOT NULL,              -- transition | late_result | spec_error | retry_scheduled | ...
        from_state TEXT,
        to_state TEXT,
        reason TEXT,
        detail TEXT                      -- JSON
    );
    CREATE INDEX events_run ON events(run_id, id);
    CREATE INDEX events_kind ON events(kind, id);
    CREATE TABLE escalations (
        id INTEGER PRIMARY KEY,
        dedup_key TEXT NOT NULL,         -- "<job>:<kind>"
        job TEXT NOT NULL,
        kind TEXT NOT NULL,
        severity TEXT NOT NULL,          -- critical | warning | info
        state TEXT NOT NULL,             -- open | acknowledged | snoozed | resolved
        count INTEGER NOT NULL DEFAULT 1,
        first_seen REAL NOT NULL,
        last_seen REAL NOT NULL,
        latest_run_id INTEGER,
        owner TEXT,
        reason TEXT,
        acked_by TEXT, acked_at REAL,
        snoozed_by TEXT, snoozed_until REAL,
        resolved_by TEXT, resolved_at REAL,
        notified INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX escalations_open ON escalations(dedup_key) WHERE state != 'resolved';
    CREATE INDEX escalations_state ON escalations(state, severity, last_seen);
    CREATE INDEX escalations_updated ON escalations(updated_at, id);
    CREATE TABLE notifications (
        id INTEGER PRIMARY KEY,
        escalation_id INTEGER REFERENCES escalations(id),
        event TEXT NOT NULL,             -- opened | reopened | recovered
        sink TEXT NOT NULL,              -- sink name from settings
        payload TEXT NOT NULL,           -- JSON
        state TEXT NOT NULL,             -- pending | sent | failed
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error TEXT,
        created_at REAL NOT NULL,
        sent_at REAL
    );
    CREATE INDEX notifications_due ON notifications(state, next_attempt_at);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
    """,
    # 1 → 2: job controls (an operator's pause, held across restarts) and invalid spec
    # files (a job whose file never parsed has no ``jobs`` row, so its error lives here).
    """
    ALTER TABLE jobs ADD COLUMN paused_at REAL;       -- NULL: not paused
    ALTER TABLE jobs ADD COLUMN paused_by TEXT;       -- actor, e.g. operator:ana
    ALTER TABLE jobs ADD COLUMN pause_reason TEXT;
    CREATE TABLE invalid_specs (
        key TEXT PRIMARY KEY,            -- "<file>#<job>" ('' job for a file-level error)
        source TEXT NOT NULL,            -- the spec file
        job TEXT NOT NULL DEFAULT '',    -- job name when the error names one
        line INTEGER,
        field TEXT,
        message TEXT NOT NULL,
        text TEXT NOT NULL,              -- file:line: job 'x': field 'f': message
        first_seen REAL NOT NULL,
        last_seen REAL NOT NULL
    );
    """,
    # 2 → 3: notification repeats and retention look up an escalation's rows per sink.
    """
    CREATE INDEX notifications_escalation ON notifications(escalation_id, sink);
    """,
    # 3 → 4: missions (issue 15). A mission's worker runs are ordinary runs of the worker's
    # job (trigger 'mission', slot 'mission:<id>:<seq>'), linked through mission_workers.
    """
    CREATE TABLE missions (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,              -- mission definition name ('adhoc' without one)
        goal TEXT NOT NULL,
        coordinator TEXT NOT NULL,       -- claude | scripted | external
        command TEXT,                    -- scripted coordinator argv as JSON
        cwd TEXT,                        -- folder the scripted coordinator runs in
        model TEXT,
        system TEXT,
        workers TEXT NOT NULL,           -- JSON list of worker job names it may spawn
        owner TEXT,
        state TEXT NOT NULL,             -- planning | working | waiting_person | awaiting_approval | closed | aborted
        budget TEXT NOT NULL,            -- JSON {turns, workers, tokens, cost}
        turns INTEGER NOT NULL DEFAULT 0,
        tokens INTEGER NOT NULL DEFAULT 0,
        cost REAL NOT NULL DEFAULT 0,
        report TEXT,
        report_status TEXT,              -- success | partial | failed
        close_requested INTEGER NOT NULL DEFAULT 0,
        question TEXT,                   -- the open ask_person question
        reason TEXT,                     -- why it stopped planning / was aborted
        decided_by TEXT,                 -- the person who approved or aborted
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        ended_at REAL
    );
    CREATE INDEX missions_state ON missions(state, id);
    CREATE TABLE mission_workers (
        id INTEGER PRIMARY KEY,
        mission_id INTEGER NOT NULL REFERENCES missions(id),
        seq INTEGER NOT NULL,            -- 1, 2, ... within the mission
        worker TEXT NOT NULL,            -- the worker's job name
        task TEXT NOT NULL,
        context TEXT,                    -- JSON given by the coordinator
        call_id TEXT,                    -- the spawn_worker tool call it answers
        state TEXT NOT NULL,             -- running | delivered | failed | abandoned
        lineage TEXT NOT NULL,           -- runs.lineage of its attempts
        run_id INTEGER,                  -- latest attempt
        attempts INTEGER NOT NULL DEFAULT 0,
        status TEXT, confidence REAL, steps_used INTEGER, tokens INTEGER, cost REAL,
        result TEXT,                     -- JSON: the handoff's result
        error TEXT,
        note TEXT,                       -- the verification verdict, one line
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        settled_at REAL,
        abandoned_by TEXT,
        UNIQUE (mission_id, seq)
    );
    CREATE INDEX mission_workers_state ON mission_workers(state, mission_id);
    CREATE TABLE mission_calls (
        id INTEGER PRIMARY KEY,
        mission_id INTEGER NOT NULL REFERENCES missions(id),
        turn INTEGER NOT NULL,
        call_id TEXT NOT NULL,           -- tool_use id (Claude) or one we made
        name TEXT NOT NULL,              -- spawn_worker | ask_person | report | close_mission | status
        input TEXT NOT NULL,             -- JSON
        result TEXT,                     -- JSON, NULL while waiting (a worker, a person)
        is_error INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        answered_at REAL,
        UNIQUE (mission_id, call_id)
    );
    CREATE INDEX mission_calls_turn ON mission_calls(mission_id, turn);
    CREATE TABLE mission_turns (
        mission_id INTEGER NOT NULL REFERENCES missions(id),
        turn INTEGER NOT NULL,
        at REAL NOT NULL,
        reply TEXT NOT NULL,             -- JSON content blocks the coordinator answered with
        tokens INTEGER NOT NULL DEFAULT 0,
        cost REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (mission_id, turn)
    );
    """,
    # 4 → 5: `watchkeeper runs --job J` (and a job's history) newest first by end time:
    # without it a job with 100,000 runs sorts them all (~0.4 s) for a page of 30.
    """
    CREATE INDEX runs_job_ended ON runs(job, ended_at, id);
    """,
    # 5 → 6: who owns a runner's gap. Whichever process sees a runner gone (a sweep without
    # settings, ``tail``, a console) opens ``runner_gap`` owned by the runner's own ``owner``.
    """
    ALTER TABLE runners ADD COLUMN owner TEXT;        -- settings.runner_owner of that runner
    """,
    # 6 → 7: the fleet. A host life is hostname + boot id: pids are probed only within one.
    # A run records the host life that spawned it; an operator on another host asks the
    # owning runner to abandon a run through ``runs.abandon_requested_*``.
    """
    ALTER TABLE runners ADD COLUMN boot_id TEXT;      -- core.liveness.boot_id of its host life
    ALTER TABLE runners ADD COLUMN labels TEXT;       -- JSON list: settings.labels of its host
    ALTER TABLE runs ADD COLUMN host TEXT;            -- hostname of the runner that spawned it
    ALTER TABLE runs ADD COLUMN boot_id TEXT;
    ALTER TABLE runs ADD COLUMN abandon_requested_at REAL;
    ALTER TABLE runs ADD COLUMN abandon_requested_by TEXT;
    CREATE INDEX runs_host ON runs(host, state);
    """,
    # 7 → 8: why a run ended as a closed code (``core.vocabulary.EndReason``) beside the
    # sentence for people in ``runs.reason``; code reads the code, never the sentence. Rows
    # written before have only ``reason``: this backfill is the one place that reads it.
    """
    ALTER TABLE runs ADD COLUMN reason_code TEXT;     -- EndReason, set with the terminal move
    UPDATE runs SET reason_code = CASE
        WHEN state = 'succeeded' AND reason = 'partial' THEN 'partial'
        WHEN state = 'succeeded' THEN 'completed'
        WHEN state = 'blocked' THEN 'blocked'
        WHEN state = 'timed_out' AND reason LIKE 'budget%' THEN 'budget_exceeded'
        WHEN state = 'timed_out' AND reason LIKE 'fan-out not settled%' THEN 'fanout_unsettled'
        WHEN state = 'timed_out' THEN 'timeout'
        WHEN state = 'failed' AND reason IN ('verification_failed', 'supervisor_error', 'signal', 'exit_code')
            THEN reason
        WHEN state = 'failed' AND reason LIKE 'spawn_failed%' THEN 'spawn_failed'
        WHEN state = 'failed' AND signal IS NOT NULL THEN 'signal'
        WHEN state = 'failed' THEN 'exit_code'
        WHEN state = 'abandoned' AND reason IN ('job_removed', 'parent_ended') THEN reason
        WHEN state = 'abandoned' THEN 'operator'
        WHEN state = 'orphaned' AND reason IN ('lease_expired', 'start_timeout', 'runner_gone', 'runner_error',
                                               'interrupted') THEN reason
        ELSE NULL END
    WHERE state IN ('succeeded', 'failed', 'blocked', 'timed_out', 'orphaned', 'abandoned');
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
dialect.learn_schema(MIGRATIONS)


#: A ledger connection, as passed to ``Ledger.write`` callbacks and the ``conn``-taking
#: functions of ``core.ledger``. Code outside the ledger names it ``Conn`` and never imports
#: ``sqlite3``, so the ledger package is the only code that knows the ledger is SQLite.
Conn = sqlite3.Connection
#: One row of a ledger read (indexable by column name), as ``Conn.execute(...).fetchone()``
#: returns it.
Row = sqlite3.Row
#: ``UPDATE … RETURNING`` is available (SQLite ≥ 3.35; PostgreSQL always).
HAS_RETURNING = sqlite3.sqlite_version_info >= (3, 35)

#: The store failed: locked beyond the caller's patience, read-only, disk full, damaged.
#: Callers outside ``core.ledger`` catch this (never ``sqlite3.Error`` by name): such a
#: failure is logged and the write happens again on the next pass.
StorageError = sqlite3.Error


#: The store could not be opened or written right now (locked, read-only, missing folder).
StorageUnavailable = sqlite3.OperationalError
#: The file is not a usable SQLite database (damaged, encrypted, or no ledger at all).
StorageDamaged = sqlite3.DatabaseError


class LedgerError(Exception):
    """A ledger problem the caller should surface (never swallow)."""


class SchemaTooNew(LedgerError):
    """The ledger was written by a newer Watchkeeper (``user_version`` > ``SCHEMA_VERSION``)."""


class NotALedger(LedgerError):
    """The file is a SQLite database of something else: it has tables, but not a ledger's.
    Raised before anything is written to it (no table, no journal mode, no pragma)."""


#: Tables every ledger has had since its first schema (migration 0 creates them together).
LEDGER_TABLES = frozenset({"jobs", "runners", "runs", "job_outcomes", "events", "escalations", "meta"})


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Raise ``NotALedger`` unless the database at ``conn`` is empty (a new file, or an
    empty one: it becomes a ledger) or holds a ledger (``user_version`` >= 1 and the ledger's
    tables). Reads only ``sqlite_master`` and ``user_version``.

    Raises:
        NotALedger: a SQLite database of something else.
        sqlite3.DatabaseError: not a SQLite database at all.
    """
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not names:
        return
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version >= 1 and LEDGER_TABLES <= names:
        return
    shown = ", ".join(quoted(n) for n in sorted(names)[:5]) + (", …" if len(names) > 5 else "")
    raise NotALedger(f"{path}: a SQLite database of something else (tables {shown}); only an empty or new"
                     " file becomes a ledger")


def describe_error(exc: BaseException, *, read_only: bool = False) -> str:
    """A short, human explanation of why a ledger cannot be used (for one CLI line): a newer
    schema, not a ledger at all, a read-only file or folder, or the store's own message.
    Reads SQLite's error texts, which is why it lives here."""
    if isinstance(exc, NotALedger):
        return "not a Watchkeeper ledger: " + str(exc).split(": ", 1)[-1]
    if isinstance(exc, SchemaTooNew):
        m = re.search(r"schema (\d+) is newer than (\d+)", str(exc))
        found, ours = (m.group(1), m.group(2)) if m else ("?", str(SCHEMA_VERSION))
        return f"written by a newer Watchkeeper (schema {found} > {ours})"
    msg = str(exc) or type(exc).__name__
    low = msg.lower()
    if isinstance(exc, sqlite3.DatabaseError):
        if "not a database" in low or "malformed" in low or "encrypted" in low:
            return f"not a Watchkeeper ledger ({msg})"
        if "unable to open database file" in low or "readonly" in low or "read-only" in low:
            if read_only:
                return (f"cannot read the ledger ({msg}); a WAL ledger needs its -shm file, or write "
                        "access to its folder to create it")
            return f"cannot open the ledger for writing ({msg}); is the file or its folder read-only?"
        if "no such table" in low:
            return f"not a Watchkeeper ledger ({msg})"
        return f"cannot use the ledger ({msg})"
    if isinstance(exc, OSError):
        return f"cannot open the ledger ({exc.strerror or msg})"
    return f"cannot use the ledger ({msg})"


def worth_saying(exc: BaseException, attempt: int) -> bool:
    """Whether retry ``attempt`` (1-based) after ``exc`` gets a log line: SQLite's lock at
    the 1st, 10th, 100th and every 1000th; a PostgreSQL serialization conflict is routine
    between runners (the loser simply runs again), so only from the 10th."""
    if isinstance(exc, dialect.Conflict) and attempt < 10:
        return False
    return attempt in (1, 10, 100) or attempt % 1000 == 0


def is_locked_error(exc: BaseException) -> bool:
    """True for a transient error after which the whole transaction is simply run again:
    SQLite's 'database is locked' / 'busy', PostgreSQL's serialization conflicts and a lost
    connection (``dialect.Conflict``, ``dialect.Disconnected``)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    if isinstance(exc, dialect.Conflict | dialect.Disconnected):
        return True
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


def _create_private(path: Path) -> None:
    """Create the database file with mode 0600 if it does not exist yet.

    O_EXCL matters: opening and closing an fd of a file this process already has open in
    SQLite would drop SQLite's POSIX locks on it (close releases all of a process's fcntl
    locks on the file), which shows up later as 'disk I/O error'.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    except FileExistsError:
        return
    os.close(fd)


class Ledger:
    """One connection to the ledger: a SQLite file, or a PostgreSQL database named by a
    ``postgresql://`` URL (see ``core.ledger.dialect``: the same SQL runs on both).

    Args:
        path: database file, created (mode 0600) and migrated unless ``read_only``; or a
            PostgreSQL URL (schema created and migrated unless ``read_only``; the password,
            if the URL carries one, is never shown: ``name`` is the masked URL).
        busy_timeout_ms: SQLite busy timeout per statement, milliseconds.
        read_only: SQLite ``mode=ro``; PostgreSQL read-only transactions (no migrations).

    Attributes: ``backend`` ("sqlite" | "postgresql"), ``target`` (what was given), ``name``
    (safe to show), ``path`` (the SQLite file; None on PostgreSQL).

    Raises:
        SchemaTooNew: the ledger's schema is newer than this code.
        NotALedger: the file is a SQLite database of something else (left untouched: only an
            empty or new file becomes a ledger).
        sqlite3.DatabaseError: not a SQLite database, or PostgreSQL refused (a DB-API error
            of the ``sqlite3`` classes, see ``core.ledger.dialect``).
    """

    path: Path | None

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
                 read_only: bool = False) -> None:
        self.read_only = read_only
        self._down_since: float | None = None
        self.given_up = False  # give_up(): transient failures raise instead of being retried
        if dialect.is_url(path):
            self.backend = "postgresql"
            self.target: str | Path = str(path)
            self.name = dialect.mask_url(str(path))
            self.path = None
            self.conn = cast(sqlite3.Connection, dialect.PgConn(str(path), read_only=read_only))
            self._db: sqlite_utils.Database | None = None
            try:
                if not read_only:
                    self.migrate()
                elif self.schema_version > SCHEMA_VERSION:
                    raise SchemaTooNew(f"{self.name}: schema {self.schema_version} is newer than {SCHEMA_VERSION}")
            except BaseException:
                self.conn.close()  # its pooled connection goes back (a refused ledger holds none)
                raise
            return
        self.backend = "sqlite"
        self.path = file = Path(path)
        self.target = file
        self.name = str(file)
        if read_only:
            uri = f"file:{self.path}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            _create_private(self.path)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        self.conn = conn
        self._db = None
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys=ON")
        try:
            self._retry(lambda: _refuse_foreign(conn, file))
        except BaseException:
            conn.close()
            raise
        if not read_only:
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # Only possible before the first table: lets retention give pruned pages back
                # to the file system in small steps (``PRAGMA incremental_vacuum``).
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            conn.execute("PRAGMA synchronous=NORMAL")
            self.migrate()
        else:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(f"{self.path}: schema {version} is newer than {SCHEMA_VERSION}")

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of a SQLite ledger (doctor's schema check).

        Raises:
            LedgerError: the ledger is on PostgreSQL."""
        if self.backend != "sqlite":
            raise LedgerError(f"{self.name}: sqlite-utils reads only SQLite ledgers")
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    # -- schema -------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply pending forward migrations; returns the resulting schema version.

        SQLite keeps the version in ``PRAGMA user_version``; PostgreSQL in the one-row
        ``schema_version`` table, migrated under an advisory lock (two runners starting
        together do not both migrate) with the change triggers (re)installed."""
        if self.backend == "postgresql":
            return self._retry(self._migrate_pg)

        def step() -> int:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                version = self.conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise SchemaTooNew(f"{self.path}: schema {version} is newer than {SCHEMA_VERSION}")
                for i in range(version, SCHEMA_VERSION):
                    for stmt in split_sql(MIGRATIONS[i]):
                        self.conn.execute(stmt)
                    self.conn.execute(f"PRAGMA user_version={i + 1}")
                self.conn.execute("COMMIT")
                return SCHEMA_VERSION
            except BaseException:
                # SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR): a second
                # ROLLBACK would fail and hide the real error.
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        return self._retry(step)

    def _pg_version(self) -> int:
        row = self.conn.execute(dialect.FOREIGN_TABLES_SQL).fetchone()
        if row is None or not row[0]:
            if row is not None and row[1]:
                raise NotALedger(f"{self.name}: {dialect.foreign_words(list(row[1]))}")
            return 0  # an empty schema: it becomes a ledger
        got = self.conn.execute("SELECT version FROM schema_version").fetchone()
        return int(got[0]) if got else 0

    def _migrate_pg(self) -> int:
        version = self._pg_version()
        if version == SCHEMA_VERSION:
            return version
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(f"{self.name}: schema {version} is newer than {SCHEMA_VERSION}")
        conn = self.conn
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(735201)")  # one migrator at a time
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            version = self._pg_version()
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(f"{self.name}: schema {version} is newer than {SCHEMA_VERSION}")
            for i in range(version, SCHEMA_VERSION):
                for stmt in split_sql(MIGRATIONS[i]):
                    conn.execute(stmt)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                " AND table_type = 'BASE TABLE' AND table_name != 'schema_version'").fetchall()]
            for stmt in dialect.change_tracking_sql(sorted(tables)):
                conn.execute(stmt)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return SCHEMA_VERSION

    @property
    def schema_version(self) -> int:
        if self.backend == "postgresql":
            return self._pg_version()
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    # -- transactions -------------------------------------------------------------------
    def write(self, fn: Callable[[sqlite3.Connection], T], *, max_wait_s: float | None = None) -> T:
        """Run ``fn(conn)`` inside ``BEGIN IMMEDIATE … COMMIT``; retried whole on 'locked'.

        The whole function is re-run after a rollback, so ``fn`` must only touch the
        database (no side effects outside it). Retries back off exponentially (10 ms → 1 s,
        with jitter) and never give up unless ``max_wait_s`` (seconds) is given, in which
        case ``sqlite3.OperationalError`` is raised after that long.
        """
        return self._retry(lambda: self._transaction("BEGIN IMMEDIATE", fn), max_wait_s=max_wait_s)

    def _transaction(self, begin: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """One try of a write: ``begin``, ``fn(conn)``, ``COMMIT``; rolled back on any error."""
        self.conn.execute(begin)
        try:
            result = fn(self.conn)
        except BaseException:
            # SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR): a second
            # ROLLBACK would fail and hide the real error.
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return result

    def write_alone(self, fn: Callable[[sqlite3.Connection], T], *, max_wait_s: float | None = None) -> T:
        """Run ``fn(conn)`` in a transaction of its own, for compare-and-set moves that race
        other runners for the same rows (a dispatcher's claims). On SQLite this is ``write``
        (one writer at a time anyway; a ``WriterLedger``'s joins its runner's group commit).
        On PostgreSQL it runs on this object's own connection at ``READ COMMITTED``, never
        in a group commit: a row another runner moved first makes the compare-and-set
        ``UPDATE`` re-read it and change nothing (``False`` to its caller), where under
        ``SERIALIZABLE`` it failed serialization and re-ran the whole group with backoff.
        Retried and raising as ``write``."""
        if self.backend != "postgresql":
            return self.write(fn, max_wait_s=max_wait_s)
        return self._retry(lambda: self._transaction("BEGIN ISOLATION LEVEL READ COMMITTED", fn),
                           max_wait_s=max_wait_s)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent read snapshot (``BEGIN DEFERRED``) for several queries."""
        self.conn.execute("BEGIN")
        try:
            yield self.conn
        finally:
            self.conn.execute("COMMIT")

    def _retry(self, fn: Callable[[], T], *, max_wait_s: float | None = None) -> T:
        delay = 0.01
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                result = fn()
            except sqlite3.OperationalError as exc:
                if not is_locked_error(exc):
                    raise
                attempt += 1
                if self.given_up or (max_wait_s is not None and time.monotonic() - started > max_wait_s):
                    raise
                if isinstance(exc, dialect.Disconnected):
                    self._note_down(exc)
                elif worth_saying(exc, attempt):
                    log.warning("ledger %s locked (attempt %d), retrying: %s", self.name, attempt, exc)
                if isinstance(exc, dialect.Conflict) and attempt == 1:
                    delay = 0.002  # the transaction it lost to has committed: again at once (see Writer)
                time.sleep(delay * (0.5 + random.random() / 2))
                delay = min(delay * 2, 1.0)
                continue
            self._note_up()
            return result

    def give_up(self) -> None:
        """From now on a write or read that fails for a transient reason (locked, a lost
        PostgreSQL connection) raises at once instead of being retried: what a stopping
        runner asks of its ledgers when the database does not answer, so the stop ends. Its
        own writes then say so; nothing is skipped silently. Thread-safe; not undone."""
        self.given_up = True
        if isinstance(self.conn, dialect.PgConn):
            self.conn.hurry()

    def _note_down(self, exc: BaseException) -> None:
        """A lost PostgreSQL connection is one warning line, however long it stays lost; it
        is marked ``OPERATOR_LINE``, so the CLI shows it on stderr without ``-v``."""
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("ledger %s: %s; retrying with backoff", self.name, exc, extra={OPERATOR_LINE: True})

    def _note_up(self) -> None:
        if self._down_since is not None:
            log.warning("ledger %s: connection back after %.1fs", self.name, time.monotonic() - self._down_since,
                        extra={OPERATOR_LINE: True})
            self._down_since = None

    # -- small conveniences -------------------------------------------------------------
    def query(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        """Run a read query and return all rows (callers must bound it with LIMIT)."""
        return self.conn.execute(sql, params).fetchall()

    def rows(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        """Run a read query and return every row as a plain dict (column name → value, as
        sqlite-utils' ``Database.query`` gives them); callers bound it with LIMIT."""
        return [dict(zip(r.keys(), r, strict=True)) for r in self.conn.execute(sql, params).fetchall()]

    def row(self, sql: str, params: Any = ()) -> dict[str, Any] | None:
        """Run a read query and return its first row as a plain dict, or None."""
        r = self.conn.execute(sql, params).fetchone()
        return None if r is None else dict(zip(r.keys(), r, strict=True))

    def one(self, sql: str, params: Any = ()) -> sqlite3.Row | None:
        """Run a read query and return the first row or None."""
        return self.conn.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Any = ()) -> Any:
        """Run a read query that yields one row (``COUNT(*)``, a ``PRAGMA``) and return its
        first column.

        Raises:
            LedgerError: the query returned no row.
        """
        row = self.conn.execute(sql, params).fetchone()
        if row is None:
            raise LedgerError(f"no row from: {sql[:80]}")
        return row[0]

    def decode_leniently(self) -> None:
        """Read text columns holding bytes that are not UTF-8 with U+FFFD in their place
        instead of failing the read (a job may have stored such output; the console shows it
        through the escaper). PostgreSQL text is always valid UTF-8: nothing to do there."""
        if self.backend == "sqlite":
            self.conn.text_factory = lambda b: b.decode("utf-8", "replace")

    def rollback(self) -> None:
        """End a transaction a failed call left open (nothing when none is open)."""
        if self.conn.in_transaction:
            self.conn.rollback()

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes whenever another connection commits (on
        PostgreSQL: the ``wk_changes`` counter every write statement bumps)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals)."""
    out = []
    for raw in script.split(";"):
        lines = [ln.split("--", 1)[0] for ln in raw.splitlines()]
        stmt = "\n".join(lines).strip()
        if stmt:
            out.append(stmt)
    return out


def inserted_id(cur: sqlite3.Cursor) -> int:
    """The rowid an ``INSERT`` on ``cur`` created.

    Raises:
        LedgerError: the statement inserted nothing (a conflict clause skipped the row).
    """
    if cur.lastrowid is None or cur.rowcount == 0:
        raise LedgerError("the INSERT created no row")
    return int(cur.lastrowid)


def add_event(conn: sqlite3.Connection, *, actor: str, kind: AuditEvent, run_id: int | None = None,
              job: str | None = None, attempt: int | None = None, from_state: str | None = None,
              to_state: str | None = None, reason: str | None = None,
              detail: dict[str, Any] | None = None, at: float | None = None) -> int:
    """Append one row to the ``events`` audit trail; call inside the writing transaction.

    Returns the new event id. ``at`` is Unix seconds (UTC), default now.
    """
    cur = conn.execute(
        "INSERT INTO events (at, run_id, job, attempt, actor, kind, from_state, to_state, reason, detail)"
        " VALUES (?,?,?,?,?,?,?,?,?,?)",
        (at if at is not None else time.time(), run_id, job, attempt, actor, kind, from_state, to_state,
         reason, json.dumps(detail, default=str) if detail is not None else None),
    )
    return inserted_id(cur)


@overload
def row_dict(row: sqlite3.Row) -> dict[str, Any]: ...
@overload
def row_dict(row: None) -> None: ...
@overload
def row_dict(row: sqlite3.Row | None) -> dict[str, Any] | None: ...


def row_dict(row: sqlite3.Row | None) -> dict[str, Any] | None:
    """sqlite3.Row → plain dict (None stays None)."""
    return None if row is None else {k: row[k] for k in row.keys()}
