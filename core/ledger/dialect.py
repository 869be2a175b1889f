"""The SQL dialect layer: the ledger's one set of SQL, written for SQLite, run on PostgreSQL.

Why one set of SQL and a translator instead of SQL written twice: the ledger's SQL is ~300
statements over 20 modules and changes weekly; two copies would drift, and every
compare-and-set would need its twin reviewed. The statements use a small common subset
(``?`` placeholders, ``INSERT OR IGNORE``, ``json_extract``/``json_each`` on id lists, two-argument
``MAX``/``MIN``, ``LIKE``, ``RETURNING``), and ``translate`` rewrites exactly that subset for
PostgreSQL; anything else is plain SQL both databases read the same. See docs/architecture.md.

``PgConn`` wraps one psycopg 3 connection with the part of ``sqlite3.Connection`` the ledger
uses (``execute``/``executemany``, cursors with ``fetchone``/``fetchall``/``rowcount``/
``lastrowid``, rows indexable by position and by name, ``in_transaction``), so every
``conn``-taking ledger function runs unchanged on both backends. Its errors are the
DB-API classes of ``sqlite3`` the ledger already handles: a serialization failure or a
deadlock is ``Conflict`` and a lost connection ``Disconnected`` (both "retry the whole
transaction", like SQLite's 'database is locked'); a unique violation is
``sqlite3.IntegrityError``.

Transactions: ``BEGIN IMMEDIATE`` (SQLite's one writer at a time) becomes ``BEGIN ISOLATION
LEVEL SERIALIZABLE``: PostgreSQL keeps the same guarantee (each write transaction behaves as if
it ran alone) with row locks and conflict detection instead of one lock, and a transaction that
lost a race is re-run whole by the ledger's retry loop. A plain ``BEGIN`` (a read snapshot) is
``REPEATABLE READ``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

if TYPE_CHECKING:  # psycopg is imported only when a postgresql:// ledger is opened
    import psycopg
    from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)
# psycopg-pool logs every failed connection attempt as a warning (about twenty lines for a
# ten-second outage); the ledger says it once (``Ledger._note_down``).
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

#: The NOTIFY channel the ledger's triggers signal on commit (``NOTIFY_TABLES`` changed).
CHANNEL = "watchkeeper"
#: Tables whose ``id`` is an identity column: an INSERT into them reports ``lastrowid``.
ID_TABLES = frozenset({"runs", "events", "escalations", "notifications", "missions", "mission_workers",
                       "mission_calls"})
#: Tables whose changes wake sleeping runners: what dispatch and missions read (a runner's
#: feed, ``core.ledger.wake.follow(tables=WAKE_TABLES)``, ignores the others' ``NOTIFY``).
WAKE_TABLES = frozenset({"runs", "jobs", "missions", "mission_workers", "mission_calls"})
#: Tables whose changes ``NOTIFY`` (payload: the table's name): the runners' tables, and what a
#: console shows at once — an escalation acknowledged, snoozed, resolved or opened on another
#: console, its outbox rows, a verdict, a spec error. ``runners`` (every heartbeat), ``events``
#: (written beside one of these) and ``meta`` only bump the change counter: a console's pulse
#: reads heartbeat ages anyway.
NOTIFY_TABLES = WAKE_TABLES | {"escalations", "notifications", "job_outcomes", "invalid_specs"}


def is_url(target: object) -> bool:
    """True when ``target`` names a PostgreSQL ledger (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def scrub(text: str, url: str) -> str:
    """``text`` (an error from libpq about ``url``) with every password ``url`` carries, as
    written and decoded, replaced by ``***``: libpq quotes a malformed one in its message."""
    if not is_url(url):
        return text
    parts = urlsplit(url)
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    for raw in parts.query.split("&"):
        key, _, value = raw.partition("=")
        if "password" in unquote(key).lower():
            found.append(value)
    for secret in sorted({v for f in found if f for v in (f, unquote(f))}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in the user part and in a
    ``password=`` query parameter); what logs, errors, ``status`` and the ledger ever show."""
    if not is_url(url):
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        # Any spelling (libpq refuses PASSWORD=, but the error would still show it) and
        # libpq's other secret (sslpassword).
        def secret(k: str) -> bool:
            return "password" in k.lower()
        if any(secret(k) for k, _ in pairs):
            query = urlencode([(k, "***" if secret(k) else v) for k, v in pairs], safe="*/")
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing to hide: exactly as given, so it can be pasted back
    # Assembled by hand: urlunsplit drops the "//" of an empty host ("postgresql:///db?host=/run"
    # came back as "postgresql:/db?host=/run", which names no database server).
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


# -- errors -------------------------------------------------------------------------------

class Conflict(sqlite3.OperationalError):
    """PostgreSQL could not serialize the transaction (40001) or broke a deadlock (40P01):
    nothing was written; run the whole transaction again (as after SQLite's 'locked')."""


class Disconnected(sqlite3.OperationalError):
    """The connection to PostgreSQL was lost (server restart, failover, network): what the
    transaction wrote was not committed, unless the loss came during ``COMMIT`` itself; run
    it again (every ledger write is a compare-and-set or keyed insert, so a repeat of a
    committed one changes nothing)."""


def _wrap_error(exc: Exception, conn: psycopg.Connection[Any] | None) -> sqlite3.Error:
    import psycopg
    from psycopg import errors as pe

    msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if isinstance(exc, pe.SerializationFailure | pe.DeadlockDetected | pe.LockNotAvailable):
        return Conflict(f"database is locked (PostgreSQL conflict, retried: {msg})")
    if conn is not None and conn.broken or isinstance(exc, pe.AdminShutdown | pe.CannotConnectNow) or (
            isinstance(exc, psycopg.OperationalError) and (conn is None or conn.closed)):
        what = "cannot connect to PostgreSQL" if conn is None else "connection to PostgreSQL lost"
        return Disconnected(f"{what} ({msg})")
    if isinstance(exc, pe.UndefinedTable):
        return sqlite3.OperationalError(f"no such table ({msg})")
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(msg)
    if isinstance(exc, psycopg.OperationalError):
        return sqlite3.OperationalError(msg)
    return sqlite3.DatabaseError(msg)


# -- SQL translation ----------------------------------------------------------------------

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_NULLABLE: set[str] = set()  # column names nullable in some table (filled by ``learn_schema``)
#: table -> {column: nullable} (filled by ``learn_schema``): a column NOT NULL in the tables a
#: query reads keeps PG's default NULL order, so its primary key or index serves ``ORDER BY``
#: (``job_outcomes.run_id`` is a key though ``events.run_id`` is nullable).
_COLUMNS: dict[str, dict[str, bool]] = {}


def learn_schema(ddl: Iterable[str]) -> None:
    """Note which column names are nullable anywhere in the schema: ``ORDER BY`` on those
    gets SQLite's NULL order spelled out (NULLs sort first ascending), the rest keep PG's
    default so an index on a NOT NULL key still serves the order."""
    for script in ddl:
        for stmt in script.split(";"):
            stmt = "\n".join(ln.split("--", 1)[0] for ln in stmt.splitlines())
            m = re.search(r"CREATE TABLE (\w+) \((.*)\)", stmt, re.S)
            if m:
                table = _COLUMNS.setdefault(m.group(1).lower(), {})
                for col in re.split(r",\s*(?![^()]*\))", m.group(2)):
                    words = col.split()
                    if words and words[0].upper() not in ("UNIQUE", "PRIMARY", "FOREIGN", "CHECK"):
                        nullable = "NOT NULL" not in col.upper() and "PRIMARY KEY" not in col.upper()
                        table[words[0].lower()] = nullable
                        if nullable:
                            _NULLABLE.add(words[0].lower())
            m = re.search(r"ALTER TABLE (\w+) ADD COLUMN (\w+)(.*)", stmt, re.S)
            if m:
                nullable = "NOT NULL" not in m.group(3).upper()
                _COLUMNS.setdefault(m.group(1).lower(), {})[m.group(2).lower()] = nullable
                if nullable:
                    _NULLABLE.add(m.group(2).lower())


_NOT_ALIAS = {"WHERE", "ON", "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "ORDER", "GROUP",
              "LIMIT", "OFFSET", "HAVING", "UNION", "USING", "SET", "VALUES", "FOR", "AS", "NATURAL"}


def _tables_of(sql: str) -> dict[str, tuple[str, bool]]:
    """Name or alias -> (table, outer-joined) for the tables ``sql`` reads (outer-joined:
    the right side of a LEFT JOIN, whose NOT NULL columns can still come back NULL)."""
    out: dict[str, tuple[str, bool]] = {}
    for m in re.finditer(r"\b(LEFT\s+(?:OUTER\s+)?JOIN|FROM|JOIN)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?", sql, re.I):
        table = m.group(2).lower()
        if table not in _COLUMNS:
            continue
        outer = m.group(1).upper().startswith("LEFT")
        out[table] = (table, outer)
        alias = m.group(3)
        if alias and alias.upper() not in _NOT_ALIAS:
            out[alias.lower()] = (table, outer)
    return out


def _may_be_null(name: str, tables: dict[str, tuple[str, bool]]) -> bool:
    """Whether column ``name`` (``col`` or ``alias.col``) can be NULL in the tables read."""
    qual, _, col = name.lower().rpartition(".")
    if qual:
        hits = [tables[qual]] if qual in tables else []
    else:
        hits = [t for t in set(tables.values()) if col in _COLUMNS[t[0]]]
    hits = [(t, outer) for t, outer in hits if col in _COLUMNS[t]]
    if not hits:  # an expression's alias or a table not in the schema: by name, as before
        return col in _NULLABLE
    return any(outer or _COLUMNS[t][col] for t, outer in hits)


def _split_top(text: str, sep: str = ",") -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _close_paren(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced parentheses in SQL: {text[:80]}")


def _greatest_least(sql: str) -> str:
    out = sql
    for name, pg in (("MAX", "GREATEST"), ("MIN", "LEAST")):
        pos = 0
        pat = re.compile(rf"\b{name}\(", re.I)
        while (m := pat.search(out, pos)) is not None:
            end = _close_paren(out, m.end() - 1)
            if len(_split_top(out[m.end():end])) == 2:
                out = out[:m.start()] + pg + out[m.end() - 1:]
            pos = m.start() + 1
    return out


_CLAUSE = {"WHERE", "ORDER", "GROUP", "LIMIT", "OFFSET", "JOIN", "LEFT", "INNER", "CROSS", "ON", "UNION",
           "HAVING", "WINDOW", "FOR", ""}


def _alias_subqueries(sql: str) -> str:
    """PostgreSQL (before 16) wants every subquery in FROM named; SQLite does not."""
    out, pos, n = sql, 0, 0
    pat = re.compile(r"\bFROM\s*\(\s*SELECT\b", re.I)
    while (m := pat.search(out, pos)) is not None:
        open_at = out.index("(", m.start())
        end = _close_paren(out, open_at)
        nxt = re.match(r"\s*(\w*)", out[end + 1:])
        word = nxt.group(1).upper() if nxt else ""
        if word in _CLAUSE and not out[end + 1:].lstrip().startswith(","):
            n += 1
            out = f"{out[:end + 1]} AS _q{n}{out[end + 1:]}"
        pos = open_at + 1
    return out


_ORDER_END = re.compile(r"\b(LIMIT|OFFSET|FOR|FETCH)\b|\)|;", re.I)


def _null_order(sql: str) -> str:
    out, pos = [], 0
    tables = _tables_of(sql)
    for m in re.finditer(r"\bORDER BY\b", sql, re.I):
        if m.start() < pos:
            continue
        # the clause ends at LIMIT/OFFSET/FOR or at the ')' closing the enclosing subquery
        depth, end = 0, len(sql)
        i = m.end()
        while i < len(sql):
            ch = sql[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    end = i
                    break
                depth -= 1
            elif depth == 0 and _ORDER_END.match(sql, i) is not None and (
                    i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
                end = i
                break
            i += 1
        items = []
        for item in _split_top(sql[m.end():end]):
            words = item.strip()
            base = re.sub(r"\s+(ASC|DESC)$", "", words, flags=re.I)
            if "NULLS" in words.upper() or (re.fullmatch(r"[\w.]+", base) and not _may_be_null(base, tables)):
                items.append(item)
                continue
            trail = item[len(item.rstrip()):]
            items.append(item.rstrip() + (" NULLS LAST" if words.upper().endswith("DESC") else " NULLS FIRST")
                         + trail)
        out.append(sql[pos:m.end()])
        out.append(",".join(items))
        pos = end
    out.append(sql[pos:])
    return "".join(out)


def _ddl(sql: str) -> str:
    s = re.sub(r"\bINTEGER PRIMARY KEY\b", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", sql)
    s = re.sub(r"\bINTEGER\b", "BIGINT", s)
    s = re.sub(r"\bREAL\b", "DOUBLE PRECISION", s)
    m = re.match(r"(\s*CREATE (?:UNIQUE )?INDEX \w+ ON \w+)\s*\(([^)]*)\)(.*)", s, re.S | re.I)
    if m:  # NULLs first, as SQLite orders them, so ORDER BY … NULLS FIRST walks the index
        cols = ", ".join(f"{c.strip()} NULLS FIRST" for c in m.group(2).split(","))
        s = f"{m.group(1)} ({cols}){m.group(3)}"
    return s


_PRAGMAS = {
    "data_version": "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM wk_changes",
    "integrity_check": "SELECT 'ok'",
    "freelist_count": "SELECT 0",
    "auto_vacuum": "SELECT 0",
    "user_version": "SELECT version FROM schema_version",
    "page_count": "SELECT 1",
}


@lru_cache(maxsize=4096)
def translate(sql: str) -> tuple[str, bool]:
    """The PostgreSQL text of one ledger statement, and whether it reports ``lastrowid``
    (an INSERT into an identity table gets ``RETURNING id``).

    Raises:
        ValueError: a construct the layer does not translate (``INSERT OR REPLACE``,
            an unknown ``PRAGMA``) — a ledger change must stay in the common subset.
    """
    literals: list[str] = []

    def keep(m: re.Match[str]) -> str:
        literals.append(m.group(0))
        return f"\x00{len(literals) - 1}\x00"

    s = _LITERAL.sub(keep, sql.strip())
    head = s.lstrip().upper()
    if head.startswith("PRAGMA"):
        m = re.match(r"\s*PRAGMA\s+(\w+)\s*(=|\()?", s, re.I)
        name = m.group(1).lower() if m else ""
        if m and m.group(2) is None and name in _PRAGMAS:
            return _PRAGMAS[name], False
        if name in ("database_list",):
            return "SELECT 0, 'main', current_database()", False
        if name in ("wal_checkpoint", "wal_autocheckpoint", "incremental_vacuum", "auto_vacuum", "journal_mode",
                    "synchronous", "busy_timeout", "foreign_keys", "optimize"):
            return "", False  # nothing to do on PostgreSQL (its own WAL, autovacuum, lock timeouts)
        raise ValueError(f"PRAGMA {name} has no PostgreSQL translation")
    if re.match(r"BEGIN\s+IMMEDIATE\b", head):
        return "BEGIN ISOLATION LEVEL SERIALIZABLE", False
    if re.fullmatch(r"BEGIN(\s+DEFERRED)?(\s+TRANSACTION)?", head.strip()):
        return "BEGIN ISOLATION LEVEL REPEATABLE READ", False
    if head.startswith(("CREATE TABLE", "ALTER TABLE", "CREATE INDEX", "CREATE UNIQUE INDEX")):
        s = _ddl(s)
    if re.search(r"\bINSERT\s+OR\s+REPLACE\b", s, re.I):
        raise ValueError("INSERT OR REPLACE has no place in the ledger: use ON CONFLICT … DO UPDATE")
    ignore = re.search(r"\bINSERT\s+OR\s+IGNORE\s+INTO\b", s, re.I) is not None
    s = re.sub(r"\bINSERT\s+OR\s+IGNORE\s+INTO\b", "INSERT INTO", s, flags=re.I)
    # A list of ids (the usual case) compares as bigint; a list of words is written
    # ``CAST(value AS TEXT)`` (a no-op on SQLite) and stays text here.
    s = re.sub(r"\bIN\s*\(\s*SELECT\s+CAST\(\s*value\s+AS\s+TEXT\s*\)\s+FROM\s+json_each\(\?\)\s*\)",
               "IN (SELECT jsonb_array_elements_text(?::jsonb))", s, flags=re.I)
    s = re.sub(r"\bIN\s*\(\s*SELECT\s+value\s+FROM\s+json_each\(\?\)\s*\)",
               "IN (SELECT jsonb_array_elements_text(?::jsonb)::bigint)", s, flags=re.I)

    def json_path(m: re.Match[str]) -> str:
        path = literals[int(m.group(2))]
        key = path.strip("'")
        if not key.startswith("$.") or "." in key[2:]:
            raise ValueError(f"json_extract path {path} has no PostgreSQL translation")
        return f"({m.group(1)}::jsonb ->> '{key[2:]}')"
    s = re.sub(r"\bjson_extract\(\s*([\w.]+)\s*,\s*\x00(\d+)\x00\s*\)", json_path, s, flags=re.I)
    s = re.sub(r"\bCAST\((.*?)\s+AS\s+INTEGER\)", r"CAST(\1 AS BIGINT)", s, flags=re.I)
    s = re.sub(r"\bAS\s+REAL\)", "AS DOUBLE PRECISION)", s, flags=re.I)
    s = re.sub(r"\bLIKE\b", "ILIKE", s)  # SQLite's LIKE ignores ASCII case
    s = re.sub(r"(\bAND|\bWHERE|\bON|\bOR|\()\s+\+(?=[A-Za-z_])", r"\1 ", s, flags=re.I)  # SQLite's no-index '+col'
    s = _greatest_least(s)
    s = _alias_subqueries(s)
    if not head.startswith(("CREATE", "ALTER")):
        s = _null_order(s)
    returning = re.search(r"\bRETURNING\b", s, re.I) is not None
    m = re.match(r"\s*INSERT\s+INTO\s+(\w+)", s, re.I)
    if ignore:
        if returning:
            s = re.sub(r"\bRETURNING\b", "ON CONFLICT DO NOTHING RETURNING", s, count=1, flags=re.I)
        else:
            s += " ON CONFLICT DO NOTHING"
    lastrowid = bool(m and m.group(1).lower() in ID_TABLES and not returning)
    if lastrowid:
        s += " RETURNING id"
    s = s.replace("%", "%%").replace("?", "%s")
    s = re.sub(r"\x00(\d+)\x00", lambda m: literals[int(m.group(1))].replace("%", "%%"), s)
    return s, lastrowid


# -- rows and cursors ---------------------------------------------------------------------

class PgRow(tuple[Any, ...]):
    """A result row indexable by position and by (case-insensitive) column name, like
    ``sqlite3.Row``; ``keys()`` gives the names."""

    _names: tuple[str, ...]
    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: tuple[str, ...], index: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._index[key.lower()])
            except KeyError:
                raise IndexError(f"No item with that key: {key}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    desc = cursor.description
    names = tuple(c.name for c in desc) if desc else ()
    index: dict[str, int] = {}
    for i, n in enumerate(names):
        index.setdefault(n.lower(), i)
    return lambda values: PgRow(values, names, index)


class PgCursor:
    """The part of ``sqlite3.Cursor`` the ledger reads."""

    def __init__(self, rows: list[PgRow] | None, rowcount: int, lastrowid: int | None,
                 description: Any = None) -> None:
        self._rows = rows or []
        self._at = 0
        self.rowcount = rowcount
        self.lastrowid = lastrowid
        self.description = description

    def fetchone(self) -> PgRow | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[PgRow]:
        rest = self._rows[self._at:]
        self._at = len(self._rows)
        return rest

    def fetchmany(self, size: int = 1) -> list[PgRow]:
        rest = self._rows[self._at:self._at + size]
        self._at += len(rest)
        return rest

    def __iter__(self) -> Iterator[PgRow]:
        while (row := self.fetchone()) is not None:
            yield row

    def close(self) -> None:
        self._rows = []


def _param(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)  # the schema stores flags as integers, as SQLite does
    if isinstance(v, str) and "\x00" in v:
        return v.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL; SQLite's could
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).decode("utf-8", "replace")  # undecodable output stored in a TEXT column
    return v


def clean_value(v: Any) -> Any:
    """``_param`` plus lone surrogates (text decoded with ``surrogateescape``) → U+FFFD."""
    v = _param(v)
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return v


# -- connections --------------------------------------------------------------------------

#: Statements that never return anything the caller reads: deferred to the next statement.
_DEFERRED = ("BEGIN", "SAVEPOINT", "RELEASE")

_pools: dict[str, ConnectionPool[Any]] = {}
_pools_lock = threading.Lock()
#: Most connections one process holds to one ledger (runner: writer, loop, threads, listener).
POOL_MAX = 24


def _configure(conn: psycopg.Connection[Any]) -> None:
    import psycopg
    from psycopg import ClientCursor
    from psycopg.types.numeric import NumericLoader

    class _Number(NumericLoader):
        """SUM/AVG come back as ``numeric``; the ledger (as with SQLite) wants int or float."""
        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            try:
                return int(text)
            except ValueError:
                return float(text)

    conn.autocommit = True
    # The ledger's statements are short lookups by index. PostgreSQL compiles any statement
    # whose estimated cost passes ``jit_above_cost``, which a history read on a large ledger
    # does: 20-50 ms of compiling to save microseconds. Set per session, not in the URL, so
    # the URL's own ``options`` stay as given; a server without JIT (before 11) has no such
    # setting and keeps its plans as they are.
    try:
        conn.execute("SET jit = off")
    except psycopg.errors.UndefinedObject:
        pass
    conn.cursor_factory = ClientCursor  # literal binding: typeless '?' params work as in SQLite
    conn.row_factory = _row_factory
    conn.adapters.register_loader("numeric", _Number)


def pool_for(url: str) -> ConnectionPool[Any]:
    """The process's connection pool for ``url`` (opened on first use; psycopg-pool checks a
    connection before handing it out, so one broken by a server restart is replaced)."""
    import psycopg
    from psycopg_pool import ConnectionPool

    with _pools_lock:
        pool = _pools.get(url)
        if pool is None:
            # One direct connection first: a wrong host, database or password is its own
            # clear error at once, not a pool timeout after seconds of retries.
            try:
                psycopg.connect(url, connect_timeout=10).close()
            except psycopg.Error as exc:
                err = _wrap_error(exc, None)
                err.args = (scrub(str(err), url),)
                raise err from exc
            pool = ConnectionPool(url, min_size=1, max_size=POOL_MAX, configure=_configure,
                                  check=ConnectionPool.check_connection,
                                  kwargs={"application_name": "watchkeeper"},
                                  name=f"watchkeeper {mask_url(url)}", open=False)
            pool.open(wait=False)
            _pools[url] = pool
        return pool


def connect_problem(url: str, timeout_s: int = 2) -> str | None:
    """Why PostgreSQL at ``url`` cannot be reached right now (one direct connection, waiting
    at most ``timeout_s`` whole seconds per address, libpq's ``connect_timeout``), in words;
    None when it can. For ``exec``, which must not hold a cron job back while it finds out.
    Never raises."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(2, int(timeout_s))) as conn:
            row = conn.execute(FOREIGN_TABLES_SQL).fetchone()
        if row is not None and not row[0] and row[1]:
            return foreign_words(list(row[1]))  # the caller names the ledger
    except psycopg.Error as exc:
        return scrub(str(_wrap_error(exc, None)), url)
    except Exception as exc:  # noqa: BLE001 - a malformed URL and the like: said, never raised
        return scrub(f"{type(exc).__name__}: {exc}", url)
    return None


#: (whether the current schema holds this ledger's own ``schema_version``: one ``version``
#: column; up to 6 names of its tables and views). From ``pg_catalog``, which lists
#: what the role may not read too. Tables without our ``schema_version`` (none, or another
#: tool's, such as Flyway's) belong to something else.
FOREIGN_TABLES_SQL = (
    "SELECT COALESCE((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a"
    " WHERE a.attrelid = to_regclass('schema_version') AND a.attnum > 0 AND NOT a.attisdropped)"
    " = ARRAY['version'], false),"
    " ARRAY(SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace"
    " AND c.relkind::text = ANY (ARRAY['r', 'p', 'v', 'm', 'f']) ORDER BY 1 LIMIT 6)")


def foreign_words(tables: list[str]) -> str:
    """Why a PostgreSQL database with ``tables`` and no ledger schema is refused, in words."""
    shown = ", ".join(f"'{t}'" for t in tables[:5]) + (", …" if len(tables) > 5 else "")
    return (f"a PostgreSQL database of something else (tables {shown}); only an empty or new"
            " database becomes a ledger")


def close_pools() -> None:
    """Close every pool of this process (tests, and a CLI command's exit)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


class PgConn:
    """One pooled psycopg connection behaving like the ``sqlite3.Connection`` the ledger
    code was written against (see the module docstring). Not thread-safe: one per thread,
    as with SQLite.

    A connection lost outside a transaction is replaced on the next statement; a read
    (``SELECT``/``WITH``) that meets a lost connection is re-run once on a fresh one.
    Inside a transaction the loss raises ``Disconnected`` and the caller's retry loop runs
    the transaction again.
    """

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0, read_only: bool = False) -> None:
        self.url = url
        self.masked = mask_url(url)
        self.read_only = read_only
        self._pending: list[str] = []  # BEGIN/SAVEPOINT/RELEASE waiting for the next statement
        self._timeout = connect_timeout_s
        self._conn: psycopg.Connection[Any] | None = None
        self._connect()

    def hurry(self) -> None:
        """Wait at most a second for a connection from now on (a stopping runner's ledger)."""
        self._timeout = min(self._timeout, 1.0)

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg_pool
        try:
            conn = pool_for(self.url).getconn(timeout=self._timeout)
        except psycopg_pool.PoolTimeout as exc:
            raise Disconnected(f"cannot connect to PostgreSQL {self.masked} ({exc})") from exc
        if self.read_only:
            conn.execute("SET SESSION default_transaction_read_only = on")
        self._conn = conn
        return conn

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The psycopg connection (reconnecting when it was lost)."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self._drop()
            conn = self._connect()
        return conn

    def _drop(self) -> None:
        self._pending = []
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                pool_for(self.url).putconn(conn)
            except Exception:  # noqa: BLE001 - a broken connection is discarded by the pool anyway
                log.debug("returning a broken connection to the pool failed", exc_info=True)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        if any(p.startswith("BEGIN") for p in self._pending):
            return True
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return False
        return conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR,
                                                TransactionStatus.ACTIVE)

    def execute(self, sql: str, params: Sequence[Any] | None = ()) -> PgCursor:
        try:
            pg_sql, wants_id = translate(sql)
        except ValueError as exc:
            raise sqlite3.ProgrammingError(str(exc)) from None
        if not pg_sql:
            return PgCursor(None, -1, None)
        if pg_sql.startswith(_DEFERRED):
            # Sent with the next statement, in one round trip: on a busy host each round
            # trip waits for the server's turn on a CPU, and the writer thread's group pays
            # BEGIN + a SAVEPOINT/RELEASE per write.
            self._pending.append(pg_sql)
            return PgCursor(None, -1, None)
        prefix, self._pending = self._pending, []
        args = tuple(_param(v) for v in (params or ()))
        # Safe to send again on a fresh connection after the old one was found lost: a read
        # outside any transaction, or a batch that opens its transaction (BEGIN first, from no
        # open transaction): the server discarded all of it with the connection, so nothing
        # is applied twice. A pooled connection held by a thread goes stale when the server
        # restarts, and its first use is what finds out — that first use must not fail.
        fresh = not self.in_transaction
        retry_read = not prefix and fresh and pg_sql.lstrip().upper().startswith(("SELECT", "WITH"))
        retry_batch = bool(prefix) and prefix[0].startswith("BEGIN") and fresh
        for attempt in (1, 2):
            conn = self.raw
            try:
                cur = conn.execute("; ".join([*prefix, pg_sql]), args)
                for _ in prefix:
                    cur.nextset()
                rows = cur.fetchall() if cur.description is not None else None
                lastrowid = None
                if wants_id and rows:
                    lastrowid = int(rows[-1][0])
                    rows = None
                return PgCursor(rows, cur.rowcount, lastrowid, cur.description)
            except UnicodeEncodeError:
                args = tuple(clean_value(v) for v in args)  # rare: retried once with clean text
                if attempt == 1:
                    continue
                raise
            except Exception as exc:
                import psycopg
                if not isinstance(exc, psycopg.Error):
                    raise
                err = _wrap_error(exc, conn)
                if isinstance(err, Disconnected):
                    self._drop()
                    if (retry_read or retry_batch) and attempt == 1:
                        log.info("PostgreSQL connection lost (%s); sent again on a new one", err)
                        continue
                raise err from exc
        raise AssertionError("unreachable")

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> PgCursor:
        n = 0
        for params in seq:
            n += max(0, self.execute(sql, params).rowcount)
        return PgCursor(None, n, None)

    def commit(self) -> None:
        if self.in_transaction:
            self.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction:
            self.execute("ROLLBACK")

    def __del__(self) -> None:
        # A ledger a stopping runner could not close (its thread was still reading, see
        # ``core.ledger.thread_ledgers``) is dropped when its thread ends: its connection goes
        # back to the pool instead of being lost to it. Never opens a pool (interpreter exit).
        conn = getattr(self, "_conn", None)
        pool = _pools.get(getattr(self, "url", ""))
        if conn is not None and pool is not None:
            with contextlib.suppress(Exception):
                pool.putconn(conn)

    def close(self) -> None:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            try:
                if self.in_transaction:
                    conn.execute("ROLLBACK")
                if self.read_only:
                    conn.execute("RESET default_transaction_read_only")
            except Exception:  # noqa: BLE001 - the pool discards a connection in a bad state
                log.debug("resetting a connection before returning it failed", exc_info=True)
        self._drop()


# -- schema support (PostgreSQL only) ------------------------------------------------------

def change_tracking_sql(tables: Iterable[str]) -> list[str]:
    """Statements installing the change counter (``PRAGMA data_version``'s stand-in) and the
    ``NOTIFY`` that wakes runners and consoles (``NOTIFY_TABLES``; payload: the table's name),
    one statement-level trigger per table."""
    out = [
        "CREATE SEQUENCE IF NOT EXISTS wk_changes",
        "CREATE OR REPLACE FUNCTION wk_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " PERFORM nextval('wk_changes'); RETURN NULL; END $$",
        "CREATE OR REPLACE FUNCTION wk_touch_wake() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" PERFORM nextval('wk_changes'); PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$",
    ]
    for t in tables:
        fn = "wk_touch_wake" if t in NOTIFY_TABLES else "wk_touch"
        out.append(f"CREATE OR REPLACE TRIGGER wk_changed AFTER INSERT OR UPDATE OR DELETE ON {t}"
                   f" FOR EACH STATEMENT EXECUTE FUNCTION {fn}()")
    return out


def reset_identities_sql(tables: Iterable[str]) -> list[str]:
    """After rows were copied in with their ids: move each identity past the largest id."""
    return [f"SELECT setval(pg_get_serial_sequence('{t}', 'id'), GREATEST((SELECT MAX(id) FROM {t}), 1))"
            for t in tables if t in ID_TABLES]
