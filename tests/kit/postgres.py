"""A throw-away PostgreSQL server for the tests, started from the local server binaries.

``Server.start()`` runs ``initdb`` on a temp folder and ``pg_ctl start`` on a free port,
listening on 127.0.0.1 and a socket in that folder. PostgreSQL refuses to run as root, and
CI runs as root: then both run as the ``postgres`` system user (``runuser -u postgres``)
on a folder that user owns. ``fresh_database()`` gives each test its own database, cloned
from a template that already holds the ledger schema (so a test pays no migration).

Binaries are found on PATH, else under ``/usr/lib/postgresql/*/bin`` (Debian's package);
``available()`` says why not when neither has them (``make`` installs ``postgresql``).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

_counter = itertools.count(1)


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for cand in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return cand
    return None


def available() -> str | None:
    """None when a server can be started here, else the reason it cannot."""
    for name in ("initdb", "pg_ctl"):
        if _bin(name) is None:
            return f"{name} not found (install the postgresql package)"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root without runuser"
        try:
            import pwd
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    return None


def reap_orphans() -> None:
    """Stop the throw-away servers of test sessions that died without stopping them (killed
    by a timeout): each server's folder records its session's pid in ``owner.pid``."""
    for root in glob.glob(os.path.join(tempfile.gettempdir(), "wk-pg-*")):
        try:
            owner = int(Path(root, "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        server = Server.__new__(Server)
        server.root, server.data, server.log = Path(root), Path(root) / "data", Path(root) / "server.log"
        server.as_root = os.geteuid() == 0
        server.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One throw-away server (``start``/``restart``/``stop``); ``url`` for the ``postgres`` role."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="wk-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.template = "wk_template"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _run(self, *argv: str) -> None:
        cmd = list(argv)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if got.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({got.returncode}): {got.stderr.strip()}\n{tail}")

    def start(self) -> Server:
        reap_orphans()
        (self.root / "owner.pid").write_text(str(os.getpid()))
        atexit.register(self.stop)  # a session that ends without its fixture teardown
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o700)
        self._run(_bin("initdb") or "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        self._pg_ctl("start")
        self._make_template()
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run(_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", opts, action, *extra)

    def restart(self) -> None:
        """Stop (fast: clients are disconnected) and start again on the same port."""
        self._pg_ctl("restart", "-m", "fast")

    def stop_only(self) -> None:
        self._run(_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-w", "stop", "-m", "fast")

    def start_only(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-w", "stop", "-m", "immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _admin(self, sql: str, db: str = "postgres") -> None:
        import psycopg
        with psycopg.connect(self.url_for(db), autocommit=True) as conn:
            conn.execute(sql)

    def _make_template(self) -> None:
        self._admin(f"CREATE DATABASE {self.template}")

    def fresh_database(self, *, schema: bool = True) -> str:
        """A new empty ledger place: a fresh PostgreSQL schema in the session's database
        (the URL sets ``search_path`` to it), with the ledger schema unless ``schema=False``;
        its URL. A schema costs a few ms where ``CREATE DATABASE`` costs seconds."""
        from core.ledger.connection import Ledger
        name = f"wk_{os.getpid()}_{next(_counter)}"
        self._admin(f"CREATE SCHEMA {name}", self.template)
        url = f"{self.url_for(self.template)}?options=-csearch_path%3D{name}"
        if schema:
            Ledger(url).close()
        return url

    def drop_database(self, url: str) -> None:
        """Drop the schema ``fresh_database`` made for ``url`` (connections closed first)."""
        name = url.rsplit("%3D", 1)[1]
        with contextlib.suppress(Exception):
            self._admin(f"DROP SCHEMA IF EXISTS {name} CASCADE", self.template)

#: Test modules whose PostgreSQL lane runs in ``make test`` (the rest of the lane is marked
#: ``soak`` by tests/conftest.py and runs in ``make soak``): the ledger's own operations,
#: the dialect, lifecycle compare-and-set, escalations and the outbox.
REPRESENTATIVE = frozenset({
    "test_postgres_ledger.py",
    "test_escalations_lifecycle.py",
    "test_outbox.py",
    "test_actions.py",
    "test_escalation_changes_reach_other_consoles.py",
    "test_hot_reads_use_indexes.py",
})


@contextlib.contextmanager
def serving() -> Iterator[Server]:
    """A started throw-away server for the ``with`` block; on the way out the ledger's
    connection pools are closed first (a pool holding connections would keep it from
    stopping), then the server stops. Used by the test session and by the benchmarks."""
    server = Server().start()
    try:
        yield server
    finally:
        from core.ledger.dialect import close_pools
        close_pools()
        server.stop()
