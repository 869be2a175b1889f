"""The PostgreSQL ledger: the dialect layer's translation, `ledger init`, `ledger copy` with
history, masked credentials, and writes that survive a server restart exactly once."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import invariants, lifecycle, runs
from core.ledger.connection import SCHEMA_VERSION, Ledger
from core.ledger.dialect import close_pools, mask_url, translate
from tests.kit import console_fixtures as cf

# -- translation (no server needed) ---------------------------------------------------------


def test_placeholders_become_percent_s_and_literals_are_kept():
    sql, wants_id = translate("SELECT name FROM jobs WHERE name = ? AND owner LIKE '50% ?' AND x = ?")
    assert sql == "SELECT name FROM jobs WHERE name = %s AND owner ILIKE '50%% ?' AND x = %s"
    assert not wants_id


def test_insert_or_ignore_is_on_conflict_do_nothing_and_reports_its_id():
    sql, wants_id = translate("INSERT OR IGNORE INTO mission_calls (a, b) VALUES (?, ?)")
    assert sql == "INSERT INTO mission_calls (a, b) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING id"
    assert wants_id


def test_sqlite_only_functions_are_rewritten():
    sql, _ = translate("UPDATE escalations SET notified = MAX(notified, ?) WHERE id IN (SELECT value FROM json_each(?))")
    assert "GREATEST(notified, %s)" in sql
    assert "IN (SELECT jsonb_array_elements_text(%s::jsonb)::bigint)" in sql
    sql, _ = translate("SELECT MAX(id) FROM runs WHERE json_extract(detail, '$.until') > 0")
    assert "MAX(id)" in sql and "(detail::jsonb ->> 'until')" in sql


def test_a_list_of_words_stays_text_and_a_list_of_ids_compares_as_bigint():
    sql, _ = translate("SELECT id FROM escalations WHERE severity IN (SELECT CAST(value AS TEXT) FROM json_each(?))"
                       " AND id IN (SELECT value FROM json_each(?))")
    assert "severity IN (SELECT jsonb_array_elements_text(%s::jsonb))" in sql
    assert "id IN (SELECT jsonb_array_elements_text(%s::jsonb)::bigint)" in sql


def test_null_order_follows_sqlite_only_where_a_column_can_be_null():
    sql, _ = translate("SELECT id FROM runs ORDER BY ended_at DESC, id DESC LIMIT 5")
    assert "ORDER BY ended_at DESC NULLS LAST, id DESC LIMIT" in sql


def test_null_order_is_judged_per_table_so_a_key_keeps_its_index():
    # job_outcomes.run_id is its primary key (events.run_id is nullable): spelling out NULLS LAST
    # there made PostgreSQL sort the whole table for the console's silent-share read.
    sql, _ = translate("SELECT silent FROM job_outcomes WHERE silent IS NOT NULL ORDER BY run_id DESC LIMIT ?")
    assert "ORDER BY run_id DESC LIMIT" in sql
    sql, _ = translate("SELECT id FROM events ORDER BY run_id DESC LIMIT ?")
    assert "ORDER BY run_id DESC NULLS LAST LIMIT" in sql
    # the right side of a LEFT JOIN can be NULL even where its column is NOT NULL
    sql, _ = translate("SELECT r.id FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id ORDER BY o.run_id DESC")
    assert sql.endswith("ORDER BY o.run_id DESC NULLS LAST")


def test_a_subquery_in_from_gets_the_name_postgresql_wants():
    sql, _ = translate("SELECT COUNT(*) FROM (SELECT 1 FROM runs LIMIT ?)")
    assert sql == "SELECT COUNT(*) FROM (SELECT 1 FROM runs LIMIT %s) AS _q1"


def test_begin_immediate_is_a_serializable_transaction():
    assert translate("BEGIN IMMEDIATE")[0] == "BEGIN ISOLATION LEVEL SERIALIZABLE"


def test_a_password_in_a_url_is_masked():
    assert mask_url("postgresql://wk:s3cret@db1:5432/ledger") == "postgresql://wk:***@db1:5432/ledger"
    assert "s3cret" not in mask_url("postgresql://db1/ledger?user=wk&password=s3cret")
    assert mask_url("postgresql://wk@db1/ledger") == "postgresql://wk@db1/ledger"
    assert "s3cret" not in mask_url("postgresql://db1/ledger?sslmode=disable&PASSWORD=s3cret")  # any spelling
    assert "s3cret" not in mask_url("postgresql://db1/ledger?sslpassword=s3cret")


def test_a_password_libpq_quotes_in_its_error_is_scrubbed():
    from core.ledger.dialect import connect_problem, scrub
    for url in ("postgresql://u@127.0.0.1:1/db?password=S3C%zzRET", "postgresql://u:S3C%zzRET@127.0.0.1:1/db",
                "postgresql://u@127.0.0.1:1/db?sslpassword=S3C%zzRET"):
        said = connect_problem(url, 2) or ""
        assert said and "S3C" not in said, said
    assert scrub('invalid percent-encoded token: "a%20b"', "postgresql://u:a%20b@h/db") == \
        'invalid percent-encoded token: "***"'
    assert scrub("password 'a b' rejected", "postgresql://u:a%20b@h/db") == "password '***' rejected"


def test_a_url_without_a_host_is_shown_as_given_so_it_can_be_pasted_back():
    # A socket folder instead of a host: shown with one slash, it named no server.
    url = "postgresql:///watchkeeper?host=/tmp/pg&port=55439"
    assert mask_url(url) == url
    assert mask_url(url + "&password=s3cret") == url + "&password=***"


# -- against the throw-away server ---------------------------------------------------------

pg = pytest.mark.pg


@pg
def test_ledger_init_creates_the_schema_and_is_idempotent(pg_server):
    url = pg_server.fresh_database(schema=False)
    try:
        for _ in range(2):
            res = CliRunner().invoke(cli, ["ledger", "init", url])
            assert res.exit_code == 0, res.output
            assert f"schema {SCHEMA_VERSION} of {SCHEMA_VERSION}" in res.output
        with Ledger(url) as led:
            assert led.schema_version == SCHEMA_VERSION
            assert led.scalar("SELECT COUNT(*) FROM schema_version") == 1
    finally:
        close_pools()
        pg_server.drop_database(url)


@pg
def test_a_password_never_shows_in_cli_output(pg_server):
    url = pg_server.url_for("nowhere").replace("postgres@", "postgres:hunter2@")
    res = CliRunner().invoke(cli, ["runs", "--ledger", url])
    assert res.exit_code == 2
    assert "hunter2" not in res.output and "***" in res.output


@pg
def test_copy_moves_a_sqlite_ledger_with_its_history(pg_server, tmp_path):
    src = tmp_path / "wk.db"
    ids = cf.build(src, hostile=True)  # runs and escalations hold bytes that are not UTF-8
    with Ledger(src) as a:  # and a NUL, which PostgreSQL text cannot hold
        a.write(lambda c: c.execute("UPDATE runs SET reason = 'a' || char(0) || 'b' WHERE id = ?",
                                    (ids["orphan_run"],)))
    url = pg_server.fresh_database(schema=False)
    with Ledger(url) as empty:
        fresh = {sql: empty.scalar(sql) for sql in (
            "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema()",
            "SELECT COUNT(*) FROM pg_constraint WHERE connamespace = current_schema()::regnamespace")}
    try:
        res = CliRunner().invoke(cli, ["ledger", "copy", str(src), url])
        assert res.exit_code == 0, res.output
        with Ledger(src) as a, Ledger(url) as b:
            for table in ("runs", "events", "job_outcomes", "escalations", "notifications", "jobs"):
                assert a.scalar(f"SELECT COUNT(*) FROM {table}") == b.scalar(f"SELECT COUNT(*) FROM {table}")
            assert [tuple(r) for r in a.query("SELECT id, job, state, attempt, ended_at FROM runs ORDER BY id")] == \
                [tuple(r) for r in b.query("SELECT id, job, state, attempt, ended_at FROM runs ORDER BY id")]
            assert b.scalar("SELECT reason FROM runs WHERE id = ?", (ids["orphan_run"],)) == "a\ufffdb"
            assert b.scalar("SELECT COUNT(*) FROM runs WHERE reason = ?", ("invalid utf8 \ufffd\ufffd here",)) == 1
            # the indexes and foreign keys set aside for the load are all back
            for sql in ("SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema()",
                        "SELECT COUNT(*) FROM pg_constraint WHERE connamespace = current_schema()::regnamespace"):
                assert b.scalar(sql) == fresh[sql]
            # ids carry on after the copied ones
            new_id = b.write(lambda c: runs.create(c, job="backup-db", slot="manual:x", trigger="manual",
                                                   actor="cli", not_before=time.time(), spec_hash=None))
            assert new_id is not None and new_id > max(ids.values())
        again = CliRunner().invoke(cli, ["ledger", "copy", str(src), url])
        assert again.exit_code == 2 and "already holds history" in again.output
    finally:
        close_pools()
        pg_server.drop_database(url)


@pg
def test_compare_and_set_has_one_winner_across_connections(pg_server):
    url = pg_server.fresh_database()
    try:
        with Ledger(url) as led:
            cf._job(led, "j", None)
            run_id = led.write(lambda c: runs.create(c, job="j", slot="s", trigger="manual", actor="t",
                                                     not_before=0, spec_hash=None))
        wins: list[bool] = []
        barrier = threading.Barrier(4)

        def claim() -> None:
            with Ledger(url) as own:
                barrier.wait()
                wins.append(lifecycle.transition(own, run_id, 1, "queued", "spawned", actor="t"))

        threads = [threading.Thread(target=claim) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(wins) == [False, False, False, True]
        with Ledger(url) as led:
            assert led.scalar("SELECT COUNT(*) FROM events WHERE kind = 'transition' AND run_id = ?", (run_id,)) == 1
    finally:
        close_pools()
        pg_server.drop_database(url)


@pg
def test_ledger_connections_do_not_compile_statements_and_keep_the_urls_options(pg_server):
    """JIT is off on every ledger connection (a history read on a large ledger paid 20-50 ms
    of compiling), set per session so the URL's own ``options`` (here the schema) still hold."""
    url = pg_server.fresh_database()
    try:
        with Ledger(url) as led:
            assert led.scalar("SHOW jit") == "off"
            assert led.scalar("SELECT current_schema()") == url.rsplit("%3D", 1)[1]
            with led.read() as snap:
                assert snap.execute("SHOW jit").fetchone()[0] == "off"
    finally:
        close_pools()
        pg_server.drop_database(url)


@pg
def test_a_ledger_dropped_unclosed_gives_its_connection_back_to_the_pool(pg_server):
    """A stopping runner leaves a thread's ledger open while that thread still reads
    (core.ledger.thread_ledgers); dropped when the thread ends, its pooled connection goes
    back instead of being lost to the pool for the life of the process."""
    import gc

    from core.ledger.dialect import pool_for
    url = pg_server.fresh_database()
    try:
        led = Ledger(url)
        assert led.scalar("SELECT 1") == 1
        pool = pool_for(url)
        lent = pool.get_stats()["pool_size"] - pool.get_stats()["pool_available"]
        del led
        gc.collect()
        assert pool.get_stats()["pool_size"] - pool.get_stats()["pool_available"] == lent - 1
    finally:
        close_pools()
        pg_server.drop_database(url)


@pg
@pytest.mark.slow
def test_writes_survive_a_server_restart_exactly_once(pg_server, caplog):
    """A writer keeps queueing runs while the server restarts: every run is written once,
    and the loss is one warning line (plus one when the connection is back)."""
    url = pg_server.fresh_database()
    try:
        with Ledger(url) as led:
            cf._job(led, "j", None)
        done: list[int] = []
        stop = threading.Event()

        def load() -> None:
            with Ledger(url) as own:
                i = 0
                while not stop.is_set() or i < 40:
                    i += 1
                    slot = f"s{i}"
                    own.write(lambda c, slot=slot: runs.create(c, job="j", slot=slot, trigger="manual",
                                                               actor="t", not_before=0, spec_hash=None,
                                                               if_absent=True))
                    done.append(i)

        t = threading.Thread(target=load)
        t.start()
        deadline = time.monotonic() + 20
        while len(done) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        with caplog.at_level("WARNING", logger="core.ledger.connection"):
            pg_server.restart()
            mark = len(done)
            while len(done) < mark + 20 and time.monotonic() < deadline + 30:
                time.sleep(0.01)
            stop.set()
            t.join(timeout=60)
        assert not t.is_alive()
        with Ledger(url) as led:
            slots = [r[0] for r in led.query("SELECT slot FROM runs WHERE job = 'j'")]
            events = led.scalar("SELECT COUNT(*) FROM events WHERE kind = 'run_queued'")
        assert len(slots) == len(set(slots)) == len(done) == events
        lost = [r for r in caplog.records if "retrying with backoff" in r.getMessage()]
        assert len(lost) <= 1
    finally:
        close_pools()
        pg_server.drop_database(url)


@pg
@pytest.mark.slow
def test_connections_idle_through_a_restart_serve_their_first_read_and_write(pg_server):
    """A thread's connection that sat idle while the server restarted is stale; its first use
    (a read snapshot, a write transaction) goes through on a new connection instead of failing
    (what made a runner settle runs by exit code after a restart)."""
    url = pg_server.fresh_database()
    try:
        with Ledger(url) as reader, Ledger(url) as writer:
            cf._job(writer, "j", None)
            assert reader.scalar("SELECT COUNT(*) FROM jobs") == 1
            pg_server.restart()
            with reader.read() as conn:  # BEGIN + SELECT: the first statements after the restart
                assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
            run_id = writer.conn.execute("SELECT 1").fetchone()[0]  # a bare read too
            assert run_id == 1
            pg_server.restart()
            made = writer.write(lambda c: runs.create(c, job="j", slot="after", trigger="manual", actor="t",
                                                      not_before=0, spec_hash=None))
            assert made is not None and reader.scalar("SELECT COUNT(*) FROM runs WHERE slot = 'after'") == 1
            assert writer._down_since is None  # never counted as an outage: nothing failed
    finally:
        close_pools()
        pg_server.drop_database(url)


def test_unknown_pragma_is_refused():
    with pytest.raises(ValueError, match="no PostgreSQL translation"):
        translate("PRAGMA table_info(runs)")



@pg
def test_doctor_finds_a_postgresql_ledger_whole_and_a_missing_column(pg_server):
    from core.spec.settings import Settings
    from core.sweep import doctor

    url = pg_server.fresh_database()
    try:
        with Ledger(url) as led:
            assert doctor.check(led, Settings(ledger=url)) == []
            led.conn.execute("ALTER TABLE jobs DROP COLUMN pause_reason")
            found = invariants.ledger_schema(led)
        assert [v.check for v in found] == ["schema"] and "pause_reason" in found[0].message
    finally:
        close_pools()
        pg_server.drop_database(url)


@pytest.mark.parametrize(("ddl", "shown"), [
    (["CREATE TABLE users (id int)", "CREATE TABLE runs (x int)"], "'runs', 'users'"),
    # Flyway's old layout: a schema_version that is not ours (a version of '2.1.0' crashed int())
    (["CREATE TABLE schema_version (installed_rank int PRIMARY KEY, version varchar(50))",
      "INSERT INTO schema_version VALUES (1, '2.1.0')"], "'schema_version'"),
    (["CREATE VIEW v AS SELECT 1 AS x"], "'v'"),
])
def test_a_database_of_something_else_is_refused_and_exec_runs_its_command_unrecorded(pg_server, ddl, shown):
    import psycopg

    from console.cli.usable import ledger_problem
    from core.ledger.connection import NotALedger

    url = pg_server.fresh_database(schema=False)
    try:
        with psycopg.connect(url, autocommit=True) as conn:  # another application's tables
            for stmt in ddl:
                conn.execute(stmt)
            before = conn.execute("SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                                  ).fetchone()[0]
        with pytest.raises(NotALedger, match=f"a PostgreSQL database of something else .tables {shown}"):
            Ledger(url)
        assert "something else" in (ledger_problem(url) or "")
        with psycopg.connect(url) as conn:  # untouched: nothing was added
            assert conn.execute("SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                                ).fetchone()[0] == before
    finally:
        close_pools()
        pg_server.drop_database(url)
