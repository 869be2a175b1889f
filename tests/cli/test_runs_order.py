"""``watchkeeper runs``: ordered by the time it shows (a run that ended later is listed
first even when it was queued earlier), runs in flight among them; ``--job`` for a job the
ledger never saw exits 2."""

from __future__ import annotations

import json

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.ledger.runs import list_runs
from tests.kit import console_fixtures as cf


def test_runs_are_listed_by_time_not_by_id(tmp_path):
    db = tmp_path / "wk.db"
    with Ledger(db) as ledger:
        ledger.conn.execute("BEGIN")
        # queued first, ended last: a long run (or a retry after backoff)
        long = cf.add_run(ledger, "backup-db", state="succeeded", ended_at=cf.NOW - 10)
        ledger.conn.execute("UPDATE runs SET started_at = ?, created_at = ? WHERE id = ?",
                            (cf.NOW - 3600, cf.NOW - 3600, long))
        short = cf.add_run(ledger, "backup-db", state="failed", ended_at=cf.NOW - 1000, exit_code=1)
        live = cf.add_run(ledger, "sync-mail", state="running", ended_at=None)
        ledger.conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (cf.NOW - 500, live))
        ledger.conn.execute("COMMIT")
        rows = list_runs(ledger, limit=10)
        assert [r.run.id for r in rows] == [long, live, short]
        assert [r.run.time for r in rows] == sorted((r.run.time for r in rows), reverse=True)
        assert [r.run.id for r in list_runs(ledger, limit=2)] == [long, live]
        assert [r.run.id for r in list_runs(ledger, state="failed")] == [short]
        assert [r.run.id for r in list_runs(ledger, state="running")] == [live]
        assert [r.run.id for r in list_runs(ledger, job="backup-db")] == [long, short]
    out = CliRunner().invoke(cli, ["runs", "--ledger", str(db), "--json"])
    assert [json.loads(x)["id"] for x in out.stdout.splitlines()] == [long, live, short]


def test_runs_for_an_unknown_job_exits_2_and_a_known_job_without_runs_exits_0(tmp_path):
    db = tmp_path / "wk.db"
    cf.build(db)
    unknown = CliRunner().invoke(cli, ["runs", "--ledger", str(db), "--job", "no-such-job"])
    assert unknown.exit_code == 2 and "no job 'no-such-job'" in unknown.stderr
    known = CliRunner().invoke(cli, ["runs", "--ledger", str(db), "--job", "cleanup"])
    assert known.exit_code == 0 and known.stdout.strip() == "no runs"
