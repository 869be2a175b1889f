"""Test data for the console: a small ledger with every kind of row, hostile text included.

Direct inserts are fine here (tests are not ``console``); run state changes made *by the
code under test* still go through ``core``.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.ledger import outcomes
from core.ledger.connection import Ledger
from tests.kit.runs import add_run as add_run_in

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
    conn = db.conn
    live = {"pid": pid, "pid_create_time": pid_create_time, "pgid": pgid, "lease_until": lease_until,
            "runner_id": runner_id, "artifacts_dir": artifacts_dir}
    run_id = add_run_in(conn, job, state, lineage=lineage, attempt=attempt, slot=slot or lineage, trigger="schedule",
                        at=started - 1, started_at=started, ended_at=ended_at, reason=reason, live=live,
                        end={"exit_code": exit_code} if ended_at is not None else None, actor="runner:r1")
    if ended_at is not None:
        outcomes.record(conn, run_id, state=state, status=status or ("success" if state == "succeeded" else state),
                        reason=reason, duration_s=12.5, exit_code=exit_code, stdout_head="hello from " + job,
                        silent=silent, verdict_reason=verdict_reason, judged_by="rules", now=ended_at,
                        **({"stderr_tail": stderr, "stderr_bytes": len(stderr)} if stderr is not None else {}))
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


class _Sink:
    """A notification sink as ``core.ledger.outbox.enqueue`` sees one (only its name)."""

    def __init__(self, name: str) -> None:
        self.name = name


def add_escalation_story(path: Path) -> dict[str, int]:
    """An escalation written the way the supervisor and operators write one (through
    ``core.ledger.escalations``): three failed runs of ``nightly-etl`` counted into one open
    item, acknowledged by ana then snoozed by bob, with an email sent and a webhook that
    failed. Returns the escalation and run ids."""
    from core import actions
    from core.ledger import escalations

    ids: dict[str, int] = {}
    with Ledger(path) as db:
        _job_tx = db.write(lambda c: _job(db, "nightly-etl", "0 2 * * *", owner="ana"))
        del _job_tx
        runs = []
        for i, at in enumerate((NOW - 7200, NOW - 3600, NOW - 600)):
            rid = db.write(lambda c, i=i, at=at: add_run(
                db, "nightly-etl", state="failed", ended_at=at, exit_code=3, lineage=f"etl-{i}",
                reason="exit_code", verdict_reason=f"nightly-etl exited with code 3; last output: \"load {i}: disk full\"",
                stderr=f"loading batch {i}\nERROR: could not extend file: No space left on device\n"))
            runs.append(rid)

        def raise_all(c):
            esc = 0
            for rid, at in zip(runs, (NOW - 7200, NOW - 3600, NOW - 600), strict=True):
                esc, _ = escalations.raise_escalation(
                    c, job="nightly-etl", kind="failed", severity="critical", run_id=rid, owner="ana",
                    reason="nightly-etl exited with code 3; last output: \"ERROR: could not extend file\"",
                    sinks=[_Sink("email"), _Sink("webhook")] if rid == runs[0] else (), now=at)
            return esc

        esc_id = db.write(raise_all)
        actions.acknowledge(db, esc_id, "ana", now=NOW - 3000)
        actions.snooze(db, esc_id, "bob", NOW + 3600, now=NOW - 300)
        db.write(lambda c: c.execute(
            "UPDATE notifications SET state = CASE sink WHEN 'email' THEN 'sent' ELSE 'failed' END,"
            " attempts = CASE sink WHEN 'email' THEN 1 ELSE 5 END, sent_at = CASE sink WHEN 'email' THEN ? END,"
            " last_error = CASE sink WHEN 'webhook' THEN 'HTTP 503 from hooks.example.net' END"
            " WHERE escalation_id = ?", (NOW - 7190, esc_id)))
    ids["esc"] = esc_id
    ids["runs"] = runs[-1]
    ids["first_run"] = runs[0]
    return ids


def running_run(tmp: Path) -> tuple[Path, int, Path]:
    """The fixture ledger (``build``) plus a running ``nightly-backup`` run whose
    ``stdout.log`` holds one line: (ledger path, run id, its artifacts folder)."""
    path = tmp / "wk.db"
    build(path)
    art = tmp / "art" / "live"
    art.mkdir(parents=True)
    (art / "stdout.log").write_bytes(b"line 1\n")
    with Ledger(path) as led:
        run_id = add_run(led, "nightly-backup", state="running", ended_at=None, artifacts_dir=str(art),
                         lease_until=NOW + 3600)
    return path, run_id, art
