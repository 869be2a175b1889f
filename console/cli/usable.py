"""Whether a ledger can record runs right now: what ``exec`` (the cron wrapper) and
``import-crontab --rewrite`` ask before they rely on one.

``exec`` must fail open: one wrong ``--ledger`` in a crontab must never stop the real job. So
before it records anything it asks ``ledger_problem``; any answer but None means the command
runs unrecorded, with one ``warning:`` line on stderr.
"""

from __future__ import annotations

import threading
from pathlib import Path

from console.cli.common import describe_ledger_error
from core.ledger.connection import Ledger, LedgerError, StorageError
from core.ledger.dialect import connect_problem, is_url

#: Longest wait for a ledger another process holds locked, seconds.
LOCK_DEADLINE_S = 5.0
#: Longest wait for a PostgreSQL ledger to answer a connection, seconds (libpq counts whole ones).
URL_DEADLINE_S = 2


def _probe(place: str, out: list[str | None]) -> None:
    p = Path(place)
    if not p.parent.is_dir():
        out.append(f"its folder {p.parent} does not exist")
        return
    if p.exists() and not p.is_file():
        out.append("not a Watchkeeper ledger (not a regular file)")
        return
    try:
        led = Ledger(p)
    except (StorageError, LedgerError, OSError) as exc:
        out.append(describe_ledger_error(exc, read_only=False))
        return
    try:
        led.write(lambda conn: None, max_wait_s=LOCK_DEADLINE_S)
        out.append(None)
    except Exception as exc:  # locked past the deadline, read-only file or media, disk error
        out.append(describe_ledger_error(exc, read_only=False))
    finally:
        led.close()


def ledger_problem(place: str | Path, *, deadline_s: float = LOCK_DEADLINE_S) -> str | None:
    """Why the ledger at ``place`` (a path, or a PostgreSQL URL) cannot record a run, in
    words; None when it can. A file is opened (created and migrated when new, as any writer
    does) and given one empty write transaction, waiting at most about ``deadline_s`` seconds
    for a lock; a URL gets one connection, waiting at most about ``URL_DEADLINE_S`` seconds.
    Never raises."""
    out: list[str | None] = []
    if is_url(str(place)):
        # Bounded: libpq's own timeout, and the thread's for what it does not cover (DNS).
        t = threading.Thread(target=lambda: out.append(connect_problem(str(place), URL_DEADLINE_S)),
                             name="ledger-probe", daemon=True)
        t.start()
        t.join(URL_DEADLINE_S + 1.0)
        return out[0] if out else f"no answer from the PostgreSQL server within {URL_DEADLINE_S}s"
    t = threading.Thread(target=_probe, args=(str(place), out), name="ledger-probe", daemon=True)
    t.start()
    t.join(deadline_s + 2.0)
    if not out:
        return f"locked by another process for more than {deadline_s:g}s"
    return out[0]
