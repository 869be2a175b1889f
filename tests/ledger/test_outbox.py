"""The notification outbox: enqueue on open/reopen/recovery, deliver to a local webhook and a
local command, back off on failure, resume after a restart."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from core.ledger.connection import Ledger
from core.spec.settings import CommandSink, Settings, WebhookSink
from core.supervisor import notify, supervisor
from tests.kit.supervisor import add_job, escalations_of, new_run, to_verifying


class Hook:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.bodies: list[dict] = []
        hook = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                self.send_response(hook.status)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = HTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


def _run(ledger, settings, code):
    rid = new_run(ledger)
    # a success starts after the failures ended, so it is a real recovery (an overlapping run
    # never resolves an escalation)
    to_verifying(ledger, rid, exit_code=code, started_at=time.time() + 1 if code == 0 else None)
    supervisor.settle(ledger, rid, settings=settings)


def test_open_and_recovery_are_delivered_to_webhook_and_command(ledger, tmp_path, hook):
    out = tmp_path / "cmd.json"
    sinks = [WebhookSink(name="slack", url=hook.url, recovery=True),  # recovery notices are opt-in
             CommandSink(name="cmd", command=[sys.executable, "-c",
                                              f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read())"])]
    settings = Settings(ledger=tmp_path / "wk.db", notify=[s.model_dump() for s in sinks])
    add_job(ledger, tmp_path, owner="ana")
    for _ in range(3):
        _run(ledger, settings, 1)
    rows = ledger.query("SELECT * FROM notifications ORDER BY id")
    assert [(r["event"], r["sink"]) for r in rows] == [("opened", "slack"), ("opened", "cmd")]  # dedup: one open
    stats = notify.deliver_due(ledger, settings.notify)
    assert stats.sent == 2
    assert hook.bodies[0]["text"].startswith("[CRITICAL] job failed: ")
    assert hook.bodies[0]["text"].endswith("(escalation 1, count 1, owner ana)")
    assert json.loads(out.read_text())["kind"] == "failed"
    _run(ledger, settings, 0)
    notify.deliver_due(ledger, settings.notify)
    assert hook.bodies[-1]["event"] == "recovered" and hook.bodies[-1]["text"].startswith("[RECOVERED]")
    assert {r["state"] for r in ledger.query("SELECT state FROM notifications")} == {"sent"}


def test_no_recovery_notice_when_opening_was_not_notified(ledger, tmp_path, hook):
    add_job(ledger, tmp_path)
    _run(ledger, Settings(ledger=tmp_path / "wk.db"), 1)  # no sinks at opening
    settings = Settings(ledger=tmp_path / "wk.db", notify=[{"type": "webhook", "url": hook.url}])
    _run(ledger, settings, 0)
    assert escalations_of(ledger)[0]["state"] == "resolved"
    assert ledger.query("SELECT * FROM notifications") == []


def test_failed_delivery_backs_off_and_resumes_after_restart(tmp_path):
    hook = Hook(status=500)
    try:
        path = tmp_path / "wk.db"
        settings = Settings(ledger=path, notify=[{"type": "webhook", "name": "hook", "url": hook.url}])
        with Ledger(path) as ledger:
            add_job(ledger, tmp_path)
            _run(ledger, settings, 1)
            t0 = time.time()
            assert notify.deliver_due(ledger, settings.notify, now=t0).retried == 1
            row = ledger.one("SELECT * FROM notifications")
            assert row["state"] == "pending" and row["attempts"] == 1 and "HTTP 500" in row["last_error"]
            assert row["next_attempt_at"] >= t0 + notify.backoff_s(1) - 1
            assert notify.deliver_due(ledger, settings.notify).sent == 0  # not due yet
        hook.status = 200
        with Ledger(path) as ledger:  # a restarted runner picks the pending row up
            stats = notify.deliver_due(ledger, settings.notify, now=time.time() + 3600)
            assert stats.sent == 1
            assert ledger.one("SELECT state, attempts FROM notifications")["attempts"] == 2
    finally:
        hook.close()


def test_gives_up_after_max_attempts_and_command_timeout(ledger, tmp_path):
    sink = CommandSink(name="slow", command=["sleep", "5"], timeout=0.2)
    settings = Settings(ledger=tmp_path / "wk.db", notify=[sink.model_dump()])
    add_job(ledger, tmp_path)
    _run(ledger, settings, 1)
    ledger.write(lambda c: c.execute("UPDATE notifications SET attempts = ?", (notify.MAX_ATTEMPTS - 1,)))
    stats = notify.deliver_due(ledger, settings.notify)
    assert stats.failed == 1
    row = ledger.one("SELECT * FROM notifications")
    assert row["state"] == "failed" and "timed out" in row["last_error"]


def test_delivery_respects_its_time_budget(ledger, tmp_path):
    sink = CommandSink(name="slow", command=["sleep", "5"], timeout=5)
    settings = Settings(ledger=tmp_path / "wk.db", notify=[sink.model_dump()])
    add_job(ledger, tmp_path)
    add_job(ledger, tmp_path, name="b")
    _run(ledger, settings, 1)
    rid = new_run(ledger, "b")
    to_verifying(ledger, rid, exit_code=1)
    supervisor.settle(ledger, rid, settings=settings)
    stats = notify.deliver_due(ledger, settings.notify, budget_s=0.3)
    # the first send is cut to the budget; the second is deferred, not attempted
    assert stats.retried == 1 and stats.deferred == 1


def test_every_escalation_kind_has_a_subject_phrase():
    """A subject reads as a sentence for every kind that can page (notes never do)."""
    from core.ledger.outbox import KIND_PHRASES
    from core.vocabulary import EscalationKind
    notes = {"first_success", "recovered_on_retry", "routine", "retry_pending", "abandoned", "subtask"}
    assert {k.value for k in EscalationKind} - notes <= set(KIND_PHRASES)


def test_an_escalation_opened_without_sinks_is_owed_to_the_sinks_that_hear_it(ledger, tmp_path, hook):
    """Opened by a process that knew no sinks (``watchkeeper exec`` without settings), it is
    paged by the next process that delivers, through each sink's routing (severity floor,
    owners) — on PostgreSQL too, where the routing's word lists once failed every pass."""
    from core.ledger import outbox

    add_job(ledger, tmp_path, owner="ana")
    _run(ledger, Settings(ledger=tmp_path / "wk.db"), 1)  # critical, owner ana, no sinks
    sinks = [WebhookSink(name="ana-only", url=hook.url, min_severity="warning", owners=["ana"]),
             WebhookSink(name="bob-only", url=hook.url, owners=["bob"])]
    owed = ledger.write(lambda c: outbox.enqueue_owed(c, sinks))
    assert len(owed) == 1
    assert [r["sink"] for r in ledger.query("SELECT sink FROM notifications")] == ["ana-only"]
    assert ledger.write(lambda c: outbox.enqueue_owed(c, sinks)) == []  # owed once
