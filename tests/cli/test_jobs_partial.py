"""``watchkeeper jobs`` shows a last outcome that succeeded with part of its work as
``partial``, not as a plain success; ``--json`` carries ``last_status``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf


def test_a_partial_last_outcome_reads_partial(tmp_path):
    db = tmp_path / "wk.db"
    cf.build(db)
    with Ledger(db) as ledger:
        ledger.conn.execute("BEGIN")
        cf.add_run(ledger, "cleanup", state="succeeded", status="partial", ended_at=cf.NOW - 5)
        cf.add_run(ledger, "backup-db", state="succeeded", ended_at=cf.NOW - 5)
        ledger.conn.execute("COMMIT")
    out = CliRunner().invoke(cli, ["jobs", "--ledger", str(db)])
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines()[1:] if ln and not ln.startswith(" ")}
    assert " partial " in lines["cleanup"] and " succeeded " not in lines["cleanup"]
    assert " succeeded " in lines["backup-db"]
    rows = {r["name"]: r for r in map(json.loads, CliRunner().invoke(cli, ["jobs", "--ledger", str(db), "--json"])
                                      .stdout.splitlines())}
    assert (rows["cleanup"]["last_state"], rows["cleanup"]["last_status"]) == ("succeeded", "partial")
