"""Test data for the console: a small ledger with every kind of row, hostile text included.

Direct inserts are fine here (tests are not ``console``); run state changes made *by the
code under test* still go through ``core``.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.ledger.connection import Ledger

NOW = 1_767_268_800.0  # 2026-01-01T12:00:00Z, frozen "now" for deterministic screens

#: Strings from TEXTUAL_NOTES.md that must show literally and never reach the terminal raw.
HOSTILE = [
    "error at [/path/x]",
    "bad [/",
    "[type=value_error, input_value='x']",
    "[@click=app.quit]click me[/]",
    "[bold red]styled?[/bold red] [link=http://evil]x[/link]",
    "clear\x1b[2Jscreen \x1b[31mred\x1b[0m",
    "osc52 \x1b]52;c;ZXZpbA==\x07 done",
    "reset \x1bc and c1 \x9b31m \x85 end",
    b"invalid utf8 \xff\xfe here",  # stored as raw bytes in a TEXT column
]
ESCAPES = ("\x1b", "\x9b", "\x07", "\x85", "\udcff", "\xff")


def _job(db: Ledger, name: str, schedule: str | None, every: float | None = None, owner: str = "ana",
         breaker: str = "closed") -> None:
    spec = {"name": name, "command": ["true"], "schedule": schedule, "every": every}
    db.conn.execute(
        "INSERT INTO jobs (name, kind, spec, spec_hash, schedule_text, owner, intent, breaker_state, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?,?)",
        (name, "command", json.dumps(spec), "h" + name, schedule or (f"every {every:g}s" if every else "manual"),
         owner, "does its job", breaker, NOW - 3600))


def add_run(db: Ledger, job: str, *, state: str, ended_at: float | None, attempt: int = 1, lineage: str | None = None,
            exit_code: int | None = None, reason: str | None = None, status: str | None = None,
            silent: int | None = None, verdict_reason: str | None = None, pid: int | None = None,
            pid_create_time: float | None = None, pgid: int | None = None, lease_until: float | None = None,
            runner_id: str | None = None, artifacts_dir: str | None = None, slot: str | None = None,
            stderr: str | None = None) -> int:
    lineage = lineage or f"{job}:{ended_at}:{attempt}"
    started = (ended_at - 12.5) if ended_at else NOW - 60
    cur = db.conn.execute(
        "INSERT INTO runs (job, lineage, attempt, state, slot, trigger, not_before, created_at, started_at, ended_at,"
        " updated_at, exit_code, reason, pid, pid_create_time, pgid, lease_until, runner_id, artifacts_dir)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (job, lineage, attempt, state, slot or lineage, "schedule", started - 1, started - 1, started, ended_at,
         ended_at or NOW, exit_code, reason, pid, pid_create_time, pgid, lease_until, runner_id, artifacts_dir))
    run_id = int(cur.lastrowid)
    db.conn.execute("INSERT INTO events (at, run_id, job, attempt, actor, kind, from_state, to_state)"
                    " VALUES (?,?,?,?,?,?,?,?)", (started - 1, run_id, job, attempt, "runner:r1", "transition",
                                                  None, "queued"))
    if ended_at is not None:
        db.conn.execute(
            "INSERT INTO job_outcomes (run_id, job, lineage, attempt, state, status, reason, duration_s, exit_code,"
            " stdout_head, silent, verdict_reason, judged_by, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, job, lineage, attempt, state, status or ("success" if state == "succeeded" else state), reason,
             12.5, exit_code, "hello from " + job, silent, verdict_reason, "rules", ended_at, ended_at))
        db.conn.execute("INSERT INTO events (at, run_id, job, attempt, actor, kind, from_state, to_state, reason)"
                        " VALUES (?,?,?,?,?,?,?,?,?)", (ended_at, run_id, job, attempt, "runner:r1", "transition",
                                                        "running", state, reason))
        if stderr is not None:
            db.conn.execute("UPDATE job_outcomes SET stderr_tail = ?, stderr_bytes = ? WHERE run_id = ?",
                            (stderr, len(stderr), run_id))
    return run_id


def add_escalation(db: Ledger, job: str, kind: str, severity: str, *, state: str = "open", count: int = 1,
                   last_seen: float = NOW - 300, run_id: int | None = None, reason: str = "",
                   owner: str | None = "ana") -> int:
    cur = db.conn.execute(
        "INSERT INTO escalations (dedup_key, job, kind, severity, state, count, first_seen, last_seen, latest_run_id,"
        " owner, reason, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (f"{job}:{kind}", job, kind, severity, state, count, last_seen - 3600, last_seen, run_id, owner, reason,
         last_seen))
    return int(cur.lastrowid)


def build(path: Path, *, hostile: bool = False, artifacts: Path | None = None) -> dict[str, int]:
    """A small, fully-populated ledger at ``path``. Returns ids of interesting rows."""
    ids: dict[str, int] = {}
    with Ledger(path) as db:
        db.conn.execute("BEGIN")
        for rid in ("r0", "r1"):
            db.conn.execute(
                "INSERT INTO runners (id, hostname, pid, started_at, heartbeat_at, heartbeat_s, lease_s)"
                " VALUES (?, ?, 1, ?, ?, 5, 30)", (rid, "host", NOW - 7200, NOW - 2 if rid == "r1" else NOW - 9000))
        for name, sched, every, breaker in (("backup-db", "0 3 * * *", None, "closed"),
                                            ("sync-mail", None, 300.0, "closed"),
                                            ("report", "30 6 * * 1", None, "open"),
                                            ("cleanup", None, None, "closed")):
            _job(db, name, sched, every, breaker=breaker)
        for i in range(30):
            job = ("backup-db", "sync-mail", "report")[i % 3]
            ok = i % 4 != 0
            ids.setdefault("ok_run" if ok else "failed_run", 0)
            rid = add_run(db, job, state="succeeded" if ok else "failed", ended_at=NOW - 600 - i * 300,
                          exit_code=0 if ok else 1, reason=None if ok else "exit_code",
                          silent=1 if ok else 0, verdict_reason=None if ok else f"{job} exited 1",
                          artifacts_dir=str(artifacts) if artifacts and i == 0 else None,
                          stderr=None if ok else f"{job}: starting\n{job}: error: connection to db01:5432 refused\n")
            ids["ok_run" if ok else "failed_run"] = ids["ok_run" if ok else "failed_run"] or rid
        ids["orphan_run"] = add_run(db, "sync-mail", state="orphaned", ended_at=NOW - 120, reason="lease expired",
                                    pid=424242, runner_id="r0")
        ids["risky_run"] = add_run(db, "backup-db", state="running", ended_at=None, pid=434343,
                                   lease_until=NOW - 45, runner_id="r1")
        ids["esc_crit"] = add_escalation(db, "backup-db", "failed", "critical", count=3, run_id=ids["failed_run"],
                                         reason="backup-db exited 1")
        ids["esc_warn"] = add_escalation(db, "sync-mail", "orphaned", "warning", run_id=ids["orphan_run"],
                                         reason="declared dead", last_seen=NOW - 900)
        ids["esc_info"] = add_escalation(db, "report", "slow", "info", state="acknowledged", last_seen=NOW - 4000)
        if hostile:
            for i, raw in enumerate(HOSTILE):
                bad = raw.decode("latin-1") if isinstance(raw, bytes) else raw
                rid = add_run(db, "report", state="failed", ended_at=NOW - 30 - i, exit_code=2, reason=bad,
                              verdict_reason=bad, lineage=f"hostile-{i}")
                add_escalation(db, f"bad{i}", bad, "warning", run_id=rid, reason=bad, owner=bad,
                               last_seen=NOW - 10 - i)
                db.conn.execute("UPDATE job_outcomes SET stdout_head = CAST(? AS TEXT), handoff_raw = ? WHERE run_id = ?",
                                (raw, bad, rid))
                if isinstance(raw, bytes):
                    db.conn.execute("UPDATE runs SET reason = CAST(? AS TEXT) WHERE id = ?", (raw, rid))
                    db.conn.execute("UPDATE escalations SET reason = CAST(? AS TEXT), owner = CAST(? AS TEXT)"
                                    " WHERE latest_run_id = ?", (raw, raw, rid))
                ids.setdefault("hostile_run", rid)
            db.conn.execute(
                "INSERT INTO jobs (name, kind, spec, spec_hash, schedule_text, owner, updated_at)"
                " VALUES (?,?,?,?,?,?,?)", (HOSTILE[3], "command", "{not json", "x", HOSTILE[5], HOSTILE[1], NOW))
        db.conn.execute("COMMIT")
    return ids
