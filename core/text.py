"""Time helpers. Every timestamp in the ledger is a float of Unix seconds (UTC)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now() -> float:
    """Current wall-clock time as Unix seconds (UTC, float)."""
    return time.time()


def to_dt(ts: float | None) -> datetime | None:
    """Unix seconds (UTC) → aware UTC datetime; None stays None."""
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


def iso(ts: float | None) -> str | None:
    """Unix seconds → ISO-8601 UTC string with seconds precision ("2026-11-30T04:12:00Z")."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def local_hms(ts: float | None) -> str:
    """Unix seconds → local-time "HH:MM:SS" for one-line displays; "-" for None."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S")
