"""Move a ledger to another backend with its whole history: ``watchkeeper ledger copy``.

A team that outgrows one host copies its SQLite ledger into PostgreSQL and keeps every run,
outcome, event, escalation and notification, so baselines and the audit trail carry over.
Rows keep their ids (identities are moved past the largest id afterwards); the copy is one
transaction on the destination, so a failed copy leaves it empty. Artifact folders stay
where they are: ``runs.artifacts_dir`` still names them on the host that wrote them.

Speed (a 1,000,000-run ledger is 2,000,000 rows): the load is done the way ``pg_restore``
does it. Inside the one transaction the tables' secondary indexes and foreign keys are
dropped, the rows streamed with binary ``COPY … FREEZE``, then the indexes built once and the
foreign keys checked once (one join per key instead of one lookup per row); a failure rolls
the drops back too. The rows go to ``COPY`` as SQLite returns them, with no Python work per
value; a table holding text PostgreSQL refuses (a NUL, bytes that are not UTF-8) is copied
again with every value cleaned (``dialect.clean_value``: U+FFFD for what text cannot hold).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from core.ledger import dialect
from core.ledger.connection import Ledger, LedgerError

#: Tables in an order that satisfies their foreign keys (a run's parent has a smaller id).
TABLES = ("jobs", "runners", "runs", "job_outcomes", "events", "escalations", "notifications", "meta",
          "invalid_specs", "missions", "mission_workers", "mission_calls", "mission_turns")


@dataclass
class CopyReport:
    """Rows copied per table (``rows``: table → count)."""

    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def copy_ledger(src: Ledger, dst: Ledger, *, batch: int = 5000) -> CopyReport:
    """Copy every row of the SQLite ledger ``src`` into the empty PostgreSQL ledger ``dst``.

    Both must have the current schema (open them with ``Ledger``, which migrates). Uses
    PostgreSQL's ``COPY`` (rows streamed ``batch`` at a time from SQLite), all inside one
    destination transaction with the secondary indexes and foreign keys set aside (see the
    module docstring), then checks the counts match; then ``ANALYZE`` on each table (``VACUUM
    (ANALYZE)`` on one that was not empty, so not frozen), so the first console on the copy
    reads by index.

    Raises:
        LedgerError: wrong backends, or the destination already holds history, or the
            counts differ after the copy (nothing is committed then).
    """
    if src.backend != "sqlite" or dst.backend != "postgresql":
        raise LedgerError("copy moves a SQLite ledger into PostgreSQL (SQLITE_PATH postgresql://…)")
    held = {t: int(dst.scalar(f"SELECT COUNT(*) FROM {t}")) for t in ("runs", "jobs", "events", "escalations")}
    if any(held.values()):
        what = ", ".join(f"{n} {t}" for t, n in held.items() if n)
        raise LedgerError(f"{dst.name} already holds history ({what}); copy only into an empty ledger")
    pg = dst.conn.raw  # type: ignore[attr-defined]  # the PgConn's psycopg connection
    empty = {t for t in TABLES if not pg.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0]}
    report = CopyReport()
    pg.execute("BEGIN")
    try:
        pg.execute("SET LOCAL maintenance_work_mem = '128MB'")  # each index is built in one sort
        rebuild = _set_aside(pg)
        for table in TABLES:
            report.rows[table] = _load(src, pg, table, batch, truncate=table in empty)
        for stmt in rebuild:
            pg.execute(stmt)
        for stmt in dialect.reset_identities_sql(TABLES):
            pg.execute(stmt)
        for table, n in report.rows.items():
            got = pg.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            if got != n:
                raise LedgerError(f"{table}: copied {n} row(s) but {got} arrived")
        pg.execute("COMMIT")
    except BaseException:
        pg.execute("ROLLBACK")
        raise
    # Rows that arrive by COPY have no planner statistics until autovacuum comes by, and,
    # unless frozen on the way in, an empty visibility map: until then a count reads the
    # whole heap and a deep page sorts (1,000,000 runs: the last page 0.74 s → 0.30 s, a PgDn
    # read 44 → 17 ms). A frozen table needs its statistics only.
    for table in TABLES:
        pg.execute(f"ANALYZE {table}" if table in empty else f"VACUUM (ANALYZE) {table}")
    return report


def _lenient(raw: bytes) -> str:
    """Output that was not UTF-8 sits in TEXT columns as raw bytes: carried over with U+FFFD."""
    return raw.decode("utf-8", "replace")


def _load(src: Ledger, pg: Any, table: str, batch: int, *, truncate: bool) -> int:
    """Copy ``table`` inside its own savepoint; returns the rows copied.

    An empty destination table is truncated first, so ``COPY … FREEZE`` writes its rows
    frozen and all-visible (the ``VACUUM`` after has nothing to do but statistics). The rows
    go as SQLite returns them; when a value cannot (text that is not UTF-8, a NUL, bytes in
    a TEXT column) the table is rolled back and copied again with its text cleaned."""
    import psycopg

    for clean in (False, True):
        pg.execute("SAVEPOINT copy_table")
        try:
            if truncate:
                pg.execute(f"TRUNCATE {table}")
            if clean:
                src.conn.text_factory = _lenient
            n = _copy_table(src, pg, table, batch, clean=clean, freeze=truncate)
        except (sqlite3.OperationalError, psycopg.DataError):
            pg.execute("ROLLBACK TO SAVEPOINT copy_table")
            pg.execute("RELEASE SAVEPOINT copy_table")
            if clean:
                raise
            continue
        finally:
            src.conn.text_factory = str
        pg.execute("RELEASE SAVEPOINT copy_table")
        return n
    raise AssertionError("unreachable")


def _copy_table(src: Ledger, pg: Any, table: str, batch: int, *, clean: bool, freeze: bool) -> int:
    """Stream ``table`` from ``src`` into ``pg`` with one binary ``COPY``; returns the rows sent.
    ``clean``: each value through ``dialect.clean_value`` (slow; for text PostgreSQL refused)."""
    cols = [r[1] for r in src.conn.execute(f"PRAGMA table_info({table})").fetchall()]
    types = dict(pg.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
        " WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped", (table,)).fetchall())
    cur = src.conn.execute(f"SELECT {', '.join(cols)} FROM {table}")
    n = 0
    options = "FORMAT BINARY, FREEZE" if freeze else "FORMAT BINARY"
    with pg.cursor().copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN ({options})") as cp:
        cp.set_types([types[c] for c in cols])
        write = cp.write_row
        while rows := cur.fetchmany(batch):
            for row in rows:
                write(tuple(dialect.clean_value(v) for v in row) if clean else row)
            n += len(rows)
    return n


def _set_aside(pg: Any) -> list[str]:
    """Drop the copied tables' foreign keys and their indexes that back no constraint (inside
    the caller's transaction); returns the statements that put them back, indexes first."""
    names = list(TABLES)
    indexes = pg.execute(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = current_schema()"
        " AND i.tablename = ANY(%s) AND NOT EXISTS (SELECT 1 FROM pg_constraint c"
        " WHERE c.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass)",
        (names,)).fetchall()
    keys = pg.execute(
        "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
        " WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace"
        " AND c.conrelid::regclass::text = ANY(%s)", (names,)).fetchall()
    for table, name, _ in keys:
        pg.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        pg.execute(f'DROP INDEX "{name}"')
    return [str(defn) for _, defn in indexes] + [
        f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {defn}' for table, name, defn in keys]
