"""Notifications where people read them: an Apprise sink delivering email to a local SMTP
server (aiosmtpd), routing by owner and severity, recovery opt-in, a burst grouped into one
message (group_wait), and an unacknowledged critical repeated."""

from __future__ import annotations

import json
import time

import pytest

from core.actions import acknowledge
from core.spec.settings import Settings
from core.supervisor import notify, supervisor
from tests.kit.smtp import SmtpServer
from tests.kit.supervisor import add_job, new_run, to_verifying


@pytest.fixture
def smtp():
    server = SmtpServer()
    yield server
    server.stop()


def _fail(ledger, settings, job="job", stderr="Error: disk full on /var/backups\n", code=1):
    rid = new_run(ledger, job)
    to_verifying(ledger, rid, exit_code=code, stderr=stderr)
    supervisor.settle(ledger, rid, settings=settings)
    return rid


def _mail(ledger, tmp_path, smtp, **sink):
    return Settings(ledger=tmp_path / "wk.db", notify=[{"type": "apprise", "name": "mail", "url": smtp.url, **sink}])


def test_a_failure_arrives_by_email_with_its_error_line(ledger, tmp_path, smtp):
    settings = _mail(ledger, tmp_path, smtp)
    add_job(ledger, tmp_path, owner="ana")
    rid = _fail(ledger, settings, stderr="copying 41 files\nError: disk full on /var/backups\n")
    stats = notify.deliver_due(ledger, settings.notify)
    assert stats.sent == 1 and len(smtp.box.messages) == 1
    text = smtp.box.text()
    assert "[CRITICAL] job failed: Error: disk full on /var/backups" in text
    assert "Error: disk full on /var/backups" in text          # the job's own error line
    assert f"Run: {rid}" in text and f"watchkeeper show {rid} --ledger" in text
    row = ledger.one("SELECT state, sink, attempts FROM notifications")
    assert (row["state"], row["sink"], row["attempts"]) == ("sent", "mail", 1)  # the outbox records it


def test_an_unreachable_mail_server_is_retried_with_the_error_recorded(ledger, tmp_path):
    gone = SmtpServer()
    gone.stop()  # nothing listens on its port any more
    settings = Settings(ledger=tmp_path / "wk.db", notify=[{"type": "apprise", "name": "mail", "url": gone.url}])
    add_job(ledger, tmp_path)
    _fail(ledger, settings)
    stats = notify.deliver_due(ledger, settings.notify)
    assert stats.retried == 1
    row = ledger.one("SELECT state, attempts, last_error FROM notifications")
    assert row["state"] == "pending" and row["attempts"] == 1 and "127.0.0.1" in row["last_error"]


def test_routing_by_owner_and_severity(ledger, tmp_path, smtp):
    settings = Settings(ledger=tmp_path / "wk.db", routes={"ana": ["ana-mail"]}, notify=[
        {"type": "apprise", "name": "ana-mail", "url": smtp.url},
        {"type": "command", "name": "pager", "command": ["true"], "min_severity": "critical"},
        {"type": "command", "name": "all", "command": ["true"]}])
    add_job(ledger, tmp_path, "a-job", owner="ana")
    add_job(ledger, tmp_path, "b-job", owner="bob")
    _fail(ledger, settings, "a-job")
    _fail(ledger, settings, "b-job")
    sent = {(r["sink"], json.loads(r["payload"])["job"]) for r in ledger.query("SELECT * FROM notifications")}
    assert sent == {("ana-mail", "a-job"), ("pager", "a-job"), ("all", "a-job"), ("pager", "b-job"),
                    ("all", "b-job")}
    # A warning (a too-slow or soft finding) would skip the pager: the severity filter itself.
    pager = settings.notify[1]
    assert not pager.hears("bob", "warning") and pager.hears("bob", "critical")


def test_recovery_notice_only_for_sinks_that_opt_in(ledger, tmp_path, smtp):
    settings = Settings(ledger=tmp_path / "wk.db", notify=[
        {"type": "apprise", "name": "mail", "url": smtp.url, "recovery": True},
        {"type": "command", "name": "quiet", "command": ["true"]}])
    add_job(ledger, tmp_path)
    _fail(ledger, settings)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0, started_at=time.time() + 0.01)  # after the failure ended
    supervisor.settle(ledger, rid, settings=settings)
    rows = [(r["event"], r["sink"]) for r in ledger.query("SELECT * FROM notifications ORDER BY id")]
    assert rows == [("opened", "mail"), ("opened", "quiet"), ("recovered", "mail")]
    notify.deliver_due(ledger, settings.notify)
    assert any("[RECOVERED] job recovered (job failed" in smtp.box.text(i) for i in range(len(smtp.box.messages)))


def test_a_burst_within_group_wait_is_one_email(ledger, tmp_path, smtp):
    settings = _mail(ledger, tmp_path, smtp, group_wait="30s")
    for name in ("alpha", "beta", "gamma"):
        add_job(ledger, tmp_path, name)
        _fail(ledger, settings, name, stderr=f"{name}: connection refused\n")
    first = ledger.one("SELECT MIN(created_at) AS t FROM notifications")["t"]
    assert notify.deliver_due(ledger, settings.notify, now=first + 1).sent == 0  # still inside the window
    stats = notify.deliver_due(ledger, settings.notify, now=first + 31)
    assert stats.sent == 3 and stats.messages == 1 and len(smtp.box.messages) == 1
    text = smtp.box.text()
    assert "3 escalations: alpha, beta, gamma" in text
    for name in ("alpha", "beta", "gamma"):
        assert f"{name}: connection refused" in text
    assert {r["state"] for r in ledger.query("SELECT state FROM notifications")} == {"sent"}


def test_an_unacknowledged_critical_is_repeated_until_acknowledged(ledger, tmp_path, smtp):
    settings = _mail(ledger, tmp_path, smtp, repeat="1h")
    add_job(ledger, tmp_path)
    _fail(ledger, settings)
    notify.deliver_due(ledger, settings.notify)
    opened = ledger.one("SELECT created_at FROM notifications")["created_at"]
    assert notify.repeat_unacknowledged(ledger, settings.notify, now=opened + 600) == 0
    assert notify.repeat_unacknowledged(ledger, settings.notify, now=opened + 3601) == 1
    assert notify.repeat_unacknowledged(ledger, settings.notify, now=opened + 3602) == 0  # once per interval
    notify.deliver_due(ledger, settings.notify, now=opened + 3602)
    assert "[CRITICAL] still not acknowledged: job failed" in smtp.box.text()
    esc = ledger.one("SELECT id FROM escalations")["id"]
    assert acknowledge(ledger, esc, "ana").ok
    assert notify.repeat_unacknowledged(ledger, settings.notify, now=opened + 99999) == 0


def test_a_repeat_queued_before_an_ack_is_cancelled_not_sent(ledger, tmp_path, smtp):
    """The repeat row was created, then the escalation acknowledged before delivery: the
    repeat is not mailed; the outbox keeps the row as cancelled, saying why."""
    settings = _mail(ledger, tmp_path, smtp, repeat="1h")
    add_job(ledger, tmp_path)
    _fail(ledger, settings)
    notify.deliver_due(ledger, settings.notify)
    assert len(smtp.box.messages) == 1
    opened = ledger.one("SELECT created_at FROM notifications")["created_at"]
    assert notify.repeat_unacknowledged(ledger, settings.notify, now=opened + 3601) == 1
    esc = ledger.one("SELECT id FROM escalations")["id"]
    assert acknowledge(ledger, esc, "ana").ok
    stats = notify.deliver_due(ledger, settings.notify, now=opened + 3602)
    assert stats.sent == 0 and stats.cancelled == 1 and len(smtp.box.messages) == 1
    row = ledger.one("SELECT state, last_error, attempts FROM notifications WHERE event = 'repeated'")
    assert (row["state"], row["attempts"]) == ("cancelled", 0)
    assert row["last_error"] == f"not sent: escalation {esc} is acknowledged"


def test_a_bad_apprise_url_is_a_settings_error_naming_the_field(tmp_path):
    from core.spec.settings import SettingsError, load_settings
    (tmp_path / "watchkeeper.toml").write_text('[[notify]]\ntype = "apprise"\nname = "x"\nurl = "nosuch://here"\n')
    with pytest.raises(SettingsError, match=r"notify\[0\]\.url.*not a usable Apprise URL"):
        load_settings(tmp_path)


def test_control_and_bidi_characters_from_job_output_arrive_escaped(ledger, tmp_path, smtp):
    settings = _mail(ledger, tmp_path, smtp)
    add_job(ledger, tmp_path)
    _fail(ledger, settings, stderr="\x1b]0;PWNED\x07Error: \u202edisk full\n")
    notify.deliver_due(ledger, settings.notify)
    text = smtp.box.text()
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "\\x1b]0;PWNED\\x07Error: \\u202edisk full" in text


def test_an_email_reads_as_a_sentence_with_both_streams_and_a_readable_html_part(ledger, tmp_path, smtp):
    """The subject says what happened and why; stdout and stderr both appear; the HTML part is
    a layout (output in <pre>, facts one per line), not Apprise's &nbsp; blob, and hostile
    output cannot add markup to it."""
    settings = _mail(ledger, tmp_path, smtp)
    add_job(ledger, tmp_path, "db-backup", owner="ana")
    rid = _fail(ledger, settings, "db-backup", stderr="backup: destination /mnt/backup is not mounted\n")
    ledger.write(lambda c: c.execute("UPDATE job_outcomes SET stdout_head = ? WHERE run_id = ?",
                                     ("copying 41 files\n<script>alert(1)</script>\n", rid)))
    ledger.write(lambda c: c.execute("DELETE FROM notifications"))
    esc = ledger.one("SELECT * FROM escalations")
    ledger.write(lambda c: notify.enqueue(c, dict(esc), "opened", settings.notify))
    assert notify.deliver_due(ledger, settings.notify).sent == 1
    msg = smtp.box.messages[-1]
    assert msg["subject"] == "[CRITICAL] db-backup failed: backup: destination /mnt/backup is not mounted"
    plain = msg.get_body(preferencelist=("plain",)).get_content()
    html = msg.get_body(preferencelist=("html",)).get_content()
    for part in (plain, html):
        assert "copying 41 files" in part and "backup: destination /mnt/backup is not mounted" in part
    assert "&nbsp;" not in html and "<pre" in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert f"Run: {rid}" in plain and "Host: " in plain  # one fact per line in the plain part too
    assert f"watchkeeper show {rid} --ledger" in plain
