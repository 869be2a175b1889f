"""The web console's URL is one a person elsewhere can open: a wildcard bind prints this
machine's name (its FQDN, else its hostname when the FQDN is only ``localhost``), never
``localhost``; a loopback bind keeps its address. ``up --web`` says its runner is up with the
same line as ``run``."""

from __future__ import annotations

import threading

from click.testing import CliRunner

from console.bind import url_host
from console.cli import runs
from console.cli.main import cli


def test_a_wildcard_bind_names_this_machine_and_loopback_stays_itself():
    assert url_host("0.0.0.0", fqdn="ops-box.example.org", hostname="ops-box") == "ops-box.example.org"
    assert url_host("0.0.0.0", fqdn="localhost", hostname="vm") == "vm"
    assert url_host("::", fqdn="localhost.localdomain", hostname="vm") == "vm"
    assert url_host("0.0.0.0", fqdn="localhost", hostname="localhost") == "localhost"  # nothing better known
    assert url_host("127.0.0.1") == "127.0.0.1" and url_host("::1") == "[::1]"
    assert url_host("10.0.0.5") == "10.0.0.5"


def test_up_web_prints_the_runner_line_run_prints(tmp_path, monkeypatch):
    started = threading.Event()
    line = runs.started_line

    def said(runner, settings):
        try:
            return line(runner, settings)
        finally:
            started.set()

    monkeypatch.setattr(runs, "started_line", said)
    monkeypatch.setattr("console.web.serve_console", lambda **_: started.wait(30))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a.toml").write_text('name = "a"\ncommand = "true"\nevery = "1h"\n')
    res = CliRunner().invoke(cli, ["up", str(jobs), "--web", "--ledger", str(tmp_path / "wk.db")])
    assert res.exit_code == 0, res.output
    banner = [ln for ln in res.stderr.splitlines() if ln.startswith("watchkeeper: runner ") and " on " in ln]
    assert len(banner) == 1 and " on 1 job(s), ledger " in banner[0] and banner[0].endswith("(Ctrl-C to stop)")
