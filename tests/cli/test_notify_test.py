"""``watchkeeper notify test`` sends one test message through each configured sink (an e-mail
to a local SMTP server, a command sink) and says per sink whether it was delivered."""

from __future__ import annotations

import json
import sys

import pytest

from tests.kit.cli import wk
from tests.kit.smtp import SmtpServer


@pytest.fixture
def smtp():
    server = SmtpServer()
    yield server
    server.stop()


def _settings(tmp_path, smtp, *, broken: bool = False) -> None:
    out = tmp_path / "cmd.json"
    text = (f'[[notify]]\ntype = "apprise"\nname = "ops-mail"\nurl = "{smtp.url}"\nmin_severity = "critical"\n\n'
            f'[[notify]]\ntype = "command"\nname = "log"\n'
            f'command = ["{sys.executable}", "-c", "import sys; open({str(out)!r}, \'w\').write(sys.stdin.read())"]\n')
    if broken:
        text += '\n[[notify]]\ntype = "command"\nname = "broken"\ncommand = ["sh", "-c", "echo no route >&2; exit 4"]\n'
    (tmp_path / "watchkeeper.toml").write_text(text)


@pytest.mark.slow
def test_every_sink_gets_the_test_and_each_delivery_is_reported(tmp_path, smtp):
    _settings(tmp_path, smtp, broken=True)
    res = wk("notify", "test", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 1, res.stderr  # one sink failed
    lines = res.stdout.splitlines()
    assert lines[0].startswith("ops-mail (apprise): delivered in ")
    assert lines[1].startswith("log (command): delivered in ")
    assert lines[2].startswith("broken (command): FAILED after ") and lines[2].endswith(": exit 4: no route")
    assert "2 of 3 sink(s) delivered" in res.stderr
    # The e-mail arrived although the sink hears only critical escalations: a test reaches every sink.
    assert len(smtp.box.messages) == 1
    assert smtp.box.messages[0]["subject"].startswith("[TEST] Watchkeeper notification test: sink 'ops-mail'")
    sent = json.loads((tmp_path / "cmd.json").read_text())
    assert sent["event"] == "test" and "sink 'log'" in sent["title"] and sent["escalation_id"] is None
    assert not (tmp_path / "watchkeeper.db").exists()  # nothing written to a ledger


@pytest.mark.slow
def test_sink_picks_one_and_an_unknown_name_is_an_error(tmp_path, smtp):
    _settings(tmp_path, smtp)
    res = wk("notify", "test", "--sink", "log", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] and [r["sink"] for r in doc["results"]] == ["log"] and smtp.box.messages == []
    bad = wk("notify", "test", "--sink", "nope", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: no sink named 'nope' in watchkeeper.toml (sinks: ops-mail, log)"
