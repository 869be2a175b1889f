"""``watchkeeper mission list/show`` print untrusted text (goals, tasks, notes, questions,
reports) through the CLI's one escaper: control sequences are shown, never obeyed."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from core.vocabulary import MissionState, WorkerState

EVIL = "x\x1b]0;PWNED\x07 \x1b[2J \u202eevil \x9b31m"


def test_list_and_show_escape_untrusted_text(tmp_path: Path) -> None:
    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        mid = mactions.start(led, f"goal {EVIL}", workers=["w"], coordinator="external", owner=f"o {EVIL}")

        def tx(conn):
            w = ml.queue_worker(conn, mid, worker="w", task=f"task {EVIL}", context=None, call_id=None,
                                spec_hash=None, actor="test")
            ml.settle_worker(conn, w["id"], WorkerState.FAILED, actor="test", reason=EVIL, fields={"note": EVIL})
            ml.update(conn, mid, report=f"line one {EVIL}\nline two", question=f"q {EVIL}")
            ml.move(conn, mid, [MissionState.WORKING], MissionState.WAITING_PERSON, actor="test", reason=EVIL)
        led.write(tx)
    r = CliRunner()
    for argv in (["mission", "list"], ["mission", "show", str(mid)], ["mission", "show", str(mid), "--json"]):
        res = r.invoke(cli, [*argv, "--ledger", str(db)])
        assert res.exit_code == 0, res.output
        for bad in ("\x1b", "\x07", "\u202e", "\x9b"):
            assert bad not in res.output, (argv, bad)
    shown = r.invoke(cli, ["mission", "show", str(mid), "--ledger", str(db)]).output
    assert "\\x1b]0;PWNED\\x07" in shown and "line two" in shown
    assert r.invoke(cli, ["mission", "approve", str(mid), "--ledger", str(db), "--yes"]).exit_code == 1
    assert r.invoke(cli, ["mission", "abandon-worker", str(mid), "9", "--ledger", str(db), "--yes"]).exit_code == 2
    assert r.invoke(cli, ["mission", "answer", "99", "x", "--ledger", str(db)]).exit_code == 2


def test_approve_abort_and_abandon_worker_ask_first_unless_yes(tmp_path: Path) -> None:
    db = tmp_path / "wk.db"
    r = CliRunner()
    res = r.invoke(cli, ["mission", "start", "a goal", "--worker", "w", "--coordinator", "external",
                         "--ledger", str(db)])
    assert res.exit_code == 0, res.output
    # the follow-up it suggests reads the same ledger: the flags given are carried
    assert res.output.rstrip().endswith(f"watchkeeper mission show 1 --ledger {db}"), res.output
    for argv, declined in ((["approve", "1"], "not approved"), (["abort", "1"], "not aborted"),
                           (["abandon-worker", "1", "1"], "not abandoned")):
        res = r.invoke(cli, ["mission", *argv, "--ledger", str(db)], input="n\n")
        assert res.exit_code == 1 and "mission 1" in res.output and declined in res.output, (argv, res.output)
    with Ledger(db) as led:
        assert ml.get(led.conn, 1)["state"] not in ("aborted", "approved")
    res = r.invoke(cli, ["mission", "abort", "1", "--ledger", str(db)], input="y\n")
    assert res.exit_code == 0, res.output
    with Ledger(db) as led:
        assert ml.get(led.conn, 1)["state"] == "aborted"
    assert r.invoke(cli, ["mission", "abort", "7", "--ledger", str(db)]).exit_code == 2
