"""watchkeeper eval --ledger: today's judge re-judges recorded outcomes (shadow mode), writes nothing."""

from __future__ import annotations

import json

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.supervisor import supervisor
from tests.kit.supervisor import add_job, new_run, to_verifying


def test_replay_shows_would_have_vs_was(tmp_path):
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        add_job(led, tmp_path, name="export")
        for i in range(7):
            rid = new_run(led, "export")
            to_verifying(led, rid, stdout=f"exported {15000 + i * 7} rows\n")
            supervisor.settle(led, rid, settings=None)
        rid = new_run(led, "export")
        to_verifying(led, rid, stdout="exported 0 rows\n")
        supervisor.settle(led, rid, settings=None)
        # pretend an older supervisor judged the last one routine
        led.write(lambda c: c.execute("UPDATE job_outcomes SET verdict_kind = 'routine', escalate = 0, silent = 1"
                                      " WHERE run_id = ?", (rid,)))
        before = led.one("SELECT COUNT(*) AS n FROM events")["n"]
    res = CliRunner().invoke(cli, ["eval", "--ledger", str(path), "--since", "1h"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "8 outcome(s) recorded" in res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith(f"{rid:<7} "))
    assert "silent routine" in line and "escalate zero_work" in line
    assert 'why: export succeeded but it printed "exported 0 rows"' in res.output
    res = CliRunner().invoke(cli, ["eval", "--ledger", str(path), "--json", "--all"], catch_exceptions=False)
    data = json.loads(res.output)
    assert data["outcomes"] == 8 and data["jobs"]["export"]["changed"] == 1 and len(data["outcomes_list"]) == 8
    with Ledger(path) as led:
        assert led.one("SELECT COUNT(*) AS n FROM events")["n"] == before, "replay writes nothing"


def test_an_operators_later_retry_does_not_change_the_replayed_verdict(tmp_path):
    # the demo: trigger broken-backup, then retry it by hand three times; each attempt was
    # escalated when it ended, and the replay must not read the later retries as retry_pending
    from core import actions
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        add_job(led, tmp_path, name="broken-backup")
        rid = new_run(led, "broken-backup")
        ids = []
        for _ in range(4):
            to_verifying(led, rid, exit_code=1, stderr="error: disk full\n")
            supervisor.settle(led, rid, settings=None)
            ids.append(rid)
            rid = actions.retry(led, rid, "ana").target_id
        was = {r["run_id"]: (r["escalate"], r["verdict_kind"])
               for r in led.query("SELECT run_id, escalate, verdict_kind FROM job_outcomes")}
        assert all(was[i][0] for i in ids), was
    res = CliRunner().invoke(cli, ["eval", "--ledger", str(path), "--since", "1h", "--json", "--all"],
                             catch_exceptions=False)
    data = json.loads(res.output)
    assert data["jobs"]["broken-backup"]["changed"] == 0, data["outcomes_list"]
    assert all(r["now_escalate"] for r in data["outcomes_list"])
