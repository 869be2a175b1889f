"""Retention: old runs go with their outcomes, events, notifications and artifact folders;
what an open escalation cites, unfinished runs and each job's newest history stay."""

from __future__ import annotations

import json
import time

import pytest

from core.ledger import retention
from core.ledger.connection import Ledger
from tests.kit.runs import add_run

DAY = 86400.0


def add_runs(ledger: Ledger, art, job: str, n: int, *, ended_at: float, state: str = "succeeded",
             parent: int | None = None, folder_bytes: int | None = 10) -> list[int]:
    """Terminal runs with an outcome, two events and an artifacts folder each (fixture data)."""
    ids = []

    def tx(c):
        for _ in range(n):
            rid = add_run(c, job, state, task="t" if parent else "", parent_run_id=parent, at=ended_at,
                          ended_at=ended_at if state not in ("running", "queued") else None, artifacts_root=art,
                          outcome={} if state not in ("running", "queued") else None)
            ids.append((rid, art / str(rid)))
    ledger.write(tx)
    for _, folder in ids if folder_bytes is not None else ():
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_bytes(b"x" * folder_bytes)
    return [rid for rid, _ in ids]


@pytest.fixture
def art(tmp_path):
    return tmp_path / "wk-artifacts"


def count(ledger, sql, *args):
    return ledger.one(sql, args)[0]


def newest(ledger, art, now) -> int:
    """A run ended just now, added last: it holds the highest runs.id, which prune always
    keeps (ids are never handed out again), so the tests' old runs can all go."""
    return add_runs(ledger, art, "recent", 1, ended_at=now)[0]


def test_old_runs_go_with_their_rows_and_folders_keeping_each_jobs_newest(ledger, art):
    now = time.time()
    old = add_runs(ledger, art, "backup", 50, ended_at=now - 40 * DAY)
    recent = add_runs(ledger, art, "backup", 5, ended_at=now - DAY)
    other = add_runs(ledger, art, "report", 3, ended_at=now - 40 * DAY)  # fewer than keep_per_job
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=10, artifacts_dir=art, now=now)
    # keep_per_job=10: the 5 recent plus the 5 newest old ones stay.
    assert rep.runs == 45 and rep.artifact_dirs == 45 and not rep.artifact_errors
    left = {r[0] for r in ledger.query("SELECT id FROM runs")}
    assert left == set(old[-5:]) | set(recent) | set(other)
    assert count(ledger, "SELECT COUNT(*) FROM job_outcomes") == len(left)
    # a succeeded run's events: run_queued and its four moves; the pruned runs' went with them
    assert count(ledger, "SELECT COUNT(*) FROM events WHERE run_id IS NOT NULL") == 5 * len(left)
    assert sorted(int(p.name) for p in art.iterdir()) == sorted(left)
    audit = [json.loads(r["detail"]) for r in ledger.query("SELECT detail FROM events WHERE kind = 'runs_pruned'")]
    assert sum(d["runs"] for d in audit) == 45
    assert retention.last_prune_at(ledger) == pytest.approx(now)
    assert not retention.prune_due(ledger, DAY, now=now + 60) and retention.prune_due(ledger, DAY, now=now + DAY)


def test_a_run_an_open_escalation_cites_stays_and_resolved_ones_go_with_their_notifications(ledger, art):
    now = time.time()
    ids = add_runs(ledger, art, "job", 20, ended_at=now - 40 * DAY, state="failed")

    def esc(c, run_id, state):
        cur = c.execute("INSERT INTO escalations (dedup_key, job, kind, severity, state, first_seen, last_seen,"
                        " latest_run_id, updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
                        (f"job:{state}", "job", "failed", "critical", state, now, now, run_id, now))
        c.execute("INSERT INTO notifications (escalation_id, event, sink, payload, state, next_attempt_at,"
                  " created_at) VALUES (?,?,?,?,?,?,?)", (cur.lastrowid, "opened", "mail", "{}", "sent", now, now))
    # The open one is created last: the highest escalation id (which prune keeps) is not the resolved one.
    ledger.write(lambda c: (esc(c, ids[1], "resolved"), esc(c, ids[0], "open")))
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now)
    # ids[-1] holds the highest runs.id: it stays so its number is never given out again.
    assert rep.runs == 18 and rep.kept_cited == 1
    assert [r[0] for r in ledger.query("SELECT id FROM runs")] == [ids[0], ids[-1]]
    assert [r[0] for r in ledger.query("SELECT state FROM escalations")] == ["open"]
    assert rep.escalations == 1 and rep.notifications == 1
    assert count(ledger, "SELECT COUNT(*) FROM notifications") == 1


def test_unfinished_runs_and_their_parents_stay(ledger, art):
    now = time.time()
    running = add_runs(ledger, art, "job", 1, ended_at=now - 40 * DAY, state="running")
    parent = add_runs(ledger, art, "fan", 1, ended_at=now - 40 * DAY)[0]
    add_runs(ledger, art, "fan", 1, ended_at=now - 40 * DAY, state="running", parent=parent)
    done_parent = add_runs(ledger, art, "fan", 1, ended_at=now - 40 * DAY)[0]
    kids = add_runs(ledger, art, "fan", 3, ended_at=now - 40 * DAY, parent=done_parent)
    newest(ledger, art, now)
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now)
    assert rep.runs == 1 and rep.subtasks == 3
    left = {r[0] for r in ledger.query("SELECT id FROM runs")}
    assert set(running) <= left and parent in left and done_parent not in left and not (set(kids) & left)
    assert not any((art / str(k)).exists() for k in kids)


def test_dry_run_counts_and_deletes_nothing(ledger, art):
    now = time.time()
    add_runs(ledger, art, "job", 30, ended_at=now - 40 * DAY)
    newest(ledger, art, now)
    events = count(ledger, "SELECT COUNT(*) FROM events")
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now,
                          dry_run=True)
    # counted, kept: every event of the 30 old runs (run_queued and each move), none of the newest's
    newest_events = count(ledger, "SELECT COUNT(*) FROM events WHERE run_id = (SELECT MAX(id) FROM runs)")
    assert rep.dry_run and rep.runs == 30 and rep.events == events - newest_events and rep.artifact_dirs == 30
    assert count(ledger, "SELECT COUNT(*) FROM runs") == 31 and len(list(art.iterdir())) == 31
    assert retention.last_prune_at(ledger) is None


def test_over_max_size_the_oldest_go_until_it_fits(ledger, art):
    if ledger.backend == "postgresql":
        pytest.skip("PostgreSQL keeps deleted rows' space until its own (auto)vacuum: the database size"
                    " does not drop with the prune, so the size goal is a SQLite file's")
    now = time.time()
    ids = add_runs(ledger, art, "job", 100, ended_at=now - DAY, folder_bytes=100_000)  # ~10 MB of folders
    before = retention.total_size(ledger, art)
    rep = retention.prune(ledger, max_age=None, max_size=before // 2, keep_per_job=5, artifacts_dir=art, now=now)
    assert 45 <= rep.runs <= 60
    left = [r[0] for r in ledger.query("SELECT id FROM runs ORDER BY id")]
    assert left == ids[-len(left):]  # oldest first
    assert rep.size_after <= before // 2 + 200_000


def test_pruning_gives_pages_back_to_the_file_system(ledger, art):
    if ledger.backend == "postgresql":
        pytest.skip("incremental_vacuum and the file size are SQLite's; PostgreSQL vacuums by itself")
    now = time.time()
    for _ in range(10):
        add_runs(ledger, art, "job", 300, ended_at=now - 40 * DAY, folder_bytes=None)
    newest(ledger, art, now)
    ledger.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert ledger.one("PRAGMA auto_vacuum")[0] == 2  # a new ledger is created incremental
    big = (ledger.path.stat().st_size)
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now,
                          batch=500)
    assert rep.runs == 3000 and rep.vacuumed_pages > 0
    assert ledger.path.stat().st_size < big / 2


def test_prune_command_dry_run_then_for_real(tmp_path, art):
    from click.testing import CliRunner

    from console.cli.main import cli
    now = time.time()
    with Ledger(tmp_path / "wk.db") as led:
        add_runs(led, art, "job", 12, ended_at=now - 40 * DAY)
    runner = CliRunner()
    args = ["prune", "--ledger", str(tmp_path / "wk.db"), "--max-age", "30d", "--keep-per-job", "2"]
    res = runner.invoke(cli, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "would remove 10 run(s)" in res.output
    res = runner.invoke(cli, [*args, "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["runs"] == 10
    with Ledger(tmp_path / "wk.db") as led:
        assert led.one("SELECT COUNT(*) FROM runs")[0] == 2
        assert led.one("SELECT actor FROM events WHERE kind = 'runs_pruned'")[0].startswith("operator:")


def test_prune_with_retention_switched_off_says_so(tmp_path):
    from click.testing import CliRunner

    from console.cli.main import cli
    Ledger(tmp_path / "wk.db").close()
    (tmp_path / "watchkeeper.toml").write_text("[retention]\nenabled = false\n")
    res = CliRunner().invoke(cli, ["prune", "--ledger", str(tmp_path / "wk.db"), "--config",
                                   str(tmp_path / "watchkeeper.toml")])
    assert res.exit_code == 3 and "retention is off (retention.enabled = false" in res.output


def test_the_runners_daily_prune_runs_once_per_interval(tmp_path, art):
    from core.runner.daily_prune import DailyPrune
    from core.spec.settings import Settings
    now = time.time()
    settings = Settings(ledger=tmp_path / "wk.db", artifacts=art, retention={"max_age": "30d", "keep_per_job": 1})
    with Ledger(tmp_path / "wk.db") as led:
        add_runs(led, art, "job", 5, ended_at=now - 40 * DAY)
        daily = DailyPrune(settings, lambda: led, actor="runner:test")
        assert daily.tick(now).runs == 4
        add_runs(led, art, "job", 5, ended_at=now - 40 * DAY)
        assert daily.tick(now + 3600) is None             # pruned an hour ago: not due
        assert daily.tick(now + DAY).runs == 5            # a day later: due again
        off = DailyPrune(Settings(ledger=tmp_path / "wk.db", retention={"enabled": False}), lambda: led,
                         actor="runner:test")
        assert off.tick(now + 10 * DAY) is None           # switched off: never prunes


def test_a_worker_run_of_an_open_mission_stays(ledger, art):
    now = time.time()
    ids = add_runs(ledger, art, "worker", 3, ended_at=now - 40 * DAY)

    def mission(c, state, run_id):
        cur = c.execute("INSERT INTO missions (name, goal, coordinator, workers, state, budget, created_at, updated_at)"
                        " VALUES ('m', 'g', 'scripted', '[]', ?, '{}', ?, ?)", (state, now, now))
        c.execute("INSERT INTO mission_workers (mission_id, seq, worker, task, state, lineage, run_id, created_at,"
                  " updated_at) VALUES (?, 1, 'worker', 't', 'delivered', 'l', ?, ?, ?)", (cur.lastrowid, run_id, now, now))
    ledger.write(lambda c: (mission(c, "working", ids[0]), mission(c, "closed", ids[1])))
    last = newest(ledger, art, now)
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now)
    assert rep.runs == 2
    assert [r[0] for r in ledger.query("SELECT id FROM runs")] == [ids[0], last]


def test_prune_through_the_runners_writer_thread(tmp_path, art):
    from core.ledger.writer import Writer, WriterLedger
    now = time.time()
    with Ledger(tmp_path / "wk.db") as led:
        for _ in range(3):
            add_runs(led, art, "job", 300, ended_at=now - 40 * DAY, folder_bytes=None)
        newest(led, art, now)
    writer = Writer(tmp_path / "wk.db")
    try:
        led = WriterLedger(writer)
        rep = retention.prune(led, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now)
        assert rep.runs == 900 and rep.vacuumed_pages > 0
        assert led.one("SELECT COUNT(*) FROM runs")[0] == 1
        led.close()
    finally:
        writer.close()


def test_every_run_an_open_escalation_lists_as_an_occurrence_stays(ledger, art):
    from core.ledger import escalations

    now = time.time()
    ids = add_runs(ledger, art, "job", 6, ended_at=now - 40 * DAY, state="orphaned")
    # One open escalation seen twice (runs 2 and 4): both occurrences stay, not only the latest.
    for rid in (ids[2], ids[4]):
        ledger.write(lambda c, rid=rid: escalations.raise_escalation(
            c, job="job", kind="interrupted", severity="warning", reason="x", run_id=rid, owner=None, now=now))
    last = newest(ledger, art, now)
    rep = retention.prune(ledger, max_age=1, max_size=None, keep_per_job=0, artifacts_dir=art, now=now)
    assert {r[0] for r in ledger.query("SELECT id FROM runs")} == {ids[2], ids[4], last}
    assert rep.runs == 4 and rep.kept_cited == 2


def test_ids_shown_to_people_are_never_handed_out_again(ledger, art):
    """The highest runs, escalations and notifications ids stay taken after a prune (their
    ids are INTEGER PRIMARY KEY: SQLite would give a deleted highest id to the next row), so
    an old mail's 'Escalation: 3' never names a different item."""
    now = time.time()
    ids = add_runs(ledger, art, "job", 5, ended_at=now - 40 * DAY, state="failed")

    def esc(c, run_id):
        cur = c.execute("INSERT INTO escalations (dedup_key, job, kind, severity, state, first_seen, last_seen,"
                        " latest_run_id, updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
                        ("job:failed", "job", "failed", "critical", "resolved", now, now, run_id, now))
        c.execute("INSERT INTO notifications (escalation_id, event, sink, payload, state, next_attempt_at,"
                  " created_at) VALUES (?,?,?,?,?,?,?)", (cur.lastrowid, "opened", "mail", "{}", "sent", now, now))
    # The highest escalation cites ids[2]; the highest run is ids[4].
    ledger.write(lambda c: (esc(c, ids[0]), esc(c, ids[1]), esc(c, ids[2])))
    top = {t: count(ledger, f"SELECT MAX(id) FROM {t}") for t in ("runs", "escalations", "notifications")}
    rep = retention.prune(ledger, max_age=30 * DAY, max_size=None, keep_per_job=0, artifacts_dir=art, now=now)
    assert rep.runs == 3 and rep.escalations == 2
    assert [r[0] for r in ledger.query("SELECT id FROM runs ORDER BY id")] == [ids[2], ids[4]]
    for table, highest in top.items():
        assert count(ledger, f"SELECT MAX(id) FROM {table}") == highest
    ledger.write(lambda c: esc(c, ids[2]))
    assert count(ledger, "SELECT MAX(id) FROM escalations") == top["escalations"] + 1
    assert count(ledger, "SELECT MAX(id) FROM notifications") == top["notifications"] + 1
