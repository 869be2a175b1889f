"""`watchkeeper service install|uninstall`: the runner's systemd unit (Type=notify,
Restart=always, WatchdogSec), the sweep timer as the outside watcher, checked with
systemd-analyze where it is installed; and the notify protocol the runner speaks."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import socket
import subprocess

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.runner.systemd import ServiceNotifier

ME = pwd.getpwuid(os.geteuid()).pw_name


def _install(tmp_path, *extra, run_as: str | None = ME, env: dict[str, str] | None = None):
    (tmp_path / "jobs").mkdir(exist_ok=True)
    who = ["--run-as", run_as] if run_as and "--user" not in extra else []
    return CliRunner().invoke(cli, ["service", "install", str(tmp_path / "jobs"), "--unit-dir",
                                    str(tmp_path / "units"), "--ledger", str(tmp_path / "wk.db"), *who, *extra],
                              env=env)


def test_install_writes_a_notify_unit_with_a_watchdog_and_a_sweep_timer(tmp_path):
    res = _install(tmp_path)
    assert res.exit_code == 0, res.output
    units = tmp_path / "units"
    assert sorted(p.name for p in units.iterdir()) == [
        "watchkeeper-sweep.service", "watchkeeper-sweep.timer", "watchkeeper.service"]
    unit = (units / "watchkeeper.service").read_text()
    for line in ("Type=notify", "Restart=always", "WatchdogSec=30", "KillMode=process",
                 f"WorkingDirectory={tmp_path / 'jobs'}", "WantedBy=multi-user.target"):
        assert line in unit.splitlines()
    assert f"run {tmp_path / 'jobs'} --ledger {tmp_path / 'wk.db'} --quiet" in unit
    assert f"sweep --ledger {tmp_path / 'wk.db'}" in (units / "watchkeeper-sweep.service").read_text()
    assert "OnUnitActiveSec=60s" in (units / "watchkeeper-sweep.timer").read_text()
    units_dir = tmp_path / "units"
    assert (f"then: systemctl link {units_dir / 'watchkeeper.service'} {units_dir / 'watchkeeper-sweep.service'}"
            f" {units_dir / 'watchkeeper-sweep.timer'} && systemctl daemon-reload && systemctl enable --now"
            " watchkeeper.service watchkeeper-sweep.timer") in res.output.splitlines()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_units_pass_systemd_analyze_verify(tmp_path):
    assert _install(tmp_path, "--user").exit_code == 0
    files = sorted(str(p) for p in (tmp_path / "units").iterdir())
    res = subprocess.run(["systemd-analyze", "verify", *files], capture_output=True, text=True, timeout=60)
    complaints = [ln for ln in res.stderr.splitlines() if str(tmp_path) in ln]
    assert res.returncode == 0 and not complaints, res.stderr


def test_cron_flag_prints_the_sweep_line_instead_of_a_timer(tmp_path):
    res = _install(tmp_path, "--cron")
    assert res.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "units").iterdir()) == ["watchkeeper.service"]
    line = next(ln for ln in res.output.splitlines() if ln.startswith("* * * * * "))
    assert f"sweep --ledger {tmp_path / 'wk.db'}" in line


def test_uninstall_removes_the_units(tmp_path):
    _install(tmp_path)
    res = CliRunner().invoke(cli, ["service", "uninstall", "--unit-dir", str(tmp_path / "units")])
    assert res.exit_code == 0 and not list((tmp_path / "units").iterdir())
    again = CliRunner().invoke(cli, ["service", "uninstall", "--unit-dir", str(tmp_path / "units")])
    assert again.exit_code == 2 and "no watchkeeper units" in again.output


def test_notifier_sends_ready_and_watchdog_to_the_notify_socket(tmp_path, monkeypatch):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    n = ServiceNotifier()
    n.ready()
    n.alive("3 running")
    n.stopping()
    got = [sock.recv(4096).decode() for _ in range(3)]
    assert got[0].startswith("READY=1") and got[1] == "WATCHDOG=1\nSTATUS=3 running" and got[2].startswith("STOPPING=1")
    sock.close()


def test_notifier_is_silent_outside_systemd(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = ServiceNotifier()
    assert not n.enabled
    n.ready()
    n.alive()  # nothing to send to, nothing raised


@pytest.mark.slow
def test_a_real_runner_signals_ready_and_feeds_the_watchdog(tmp_path):
    import os
    import signal
    import sys
    from pathlib import Path
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(30)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "tick.toml").write_text('name = "tick"\nevery = "1h"\ncommand = ["true"]\n')
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHKEEPER_HEARTBEAT": "0.2",
           "WATCHKEEPER_LEASE": "3"}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "watchkeeper"), "run", str(tmp_path / "jobs"),
                             "--ledger", str(tmp_path / "wk.db"), "--quiet"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        got: list[str] = []
        while sum(m.startswith("WATCHDOG=1") for m in got) < 2:
            got.append(sock.recv(4096).decode())
        assert got[0].startswith("READY=1")  # ready first, then a watchdog ping per heartbeat
        proc.send_signal(signal.SIGTERM)
        while not got[-1].startswith("STOPPING=1"):
            got.append(sock.recv(4096).decode())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(90)  # systemd's default TimeoutStopSec: a stop under heavy load has taken over 30 s
        sock.close()


def test_the_sweep_reads_the_spec_folders_settings_file(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "watchkeeper.toml").write_text("heartbeat = 2\n")
    assert _install(tmp_path).exit_code == 0
    sweep_unit = (tmp_path / "units" / "watchkeeper-sweep.service").read_text()
    assert f"--config {tmp_path / 'jobs' / 'watchkeeper.toml'}" in sweep_unit  # its sinks, its lease


@pytest.mark.parametrize("settings_ledger", [None, "state/wk.db"])
def test_the_default_ledger_is_resolved_against_the_spec_folder_not_the_current_one(tmp_path, monkeypatch,
                                                                                     settings_ledger):
    jobs, elsewhere = tmp_path / "jobs", tmp_path / "elsewhere"
    jobs.mkdir()
    elsewhere.mkdir()
    if settings_ledger:
        (jobs / "watchkeeper.toml").write_text(f'ledger = "{settings_ledger}"\n')
    monkeypatch.delenv("WATCHKEEPER_LEDGER", raising=False)
    monkeypatch.chdir(elsewhere)
    res = CliRunner().invoke(cli, ["service", "install", "--user", "--unit-dir", str(tmp_path / "units"), str(jobs)])
    assert res.exit_code == 0, res.output
    want = jobs / (settings_ledger or "watchkeeper.db")
    unit = (tmp_path / "units" / "watchkeeper.service").read_text()
    assert f"--ledger {want} " in unit and str(elsewhere) not in unit
    assert f"sweep --ledger {want}" in (tmp_path / "units" / "watchkeeper-sweep.service").read_text()


def test_uninstall_help_has_an_example():
    res = CliRunner().invoke(cli, ["service", "uninstall", "--help"])
    assert "Example:" in res.output and "watchkeeper service uninstall --user --now" in res.output


# -- who the runner runs as (issue 23: never every job as root by default) -----------------------
def test_under_sudo_the_units_run_as_the_invoking_user_with_a_private_umask(tmp_path, monkeypatch):
    monkeypatch.setattr("console.cli.service.os.geteuid", lambda: 0)
    res = _install(tmp_path, run_as=None, env={"SUDO_USER": "nobody"})
    assert res.exit_code == 0, res.output
    group = grp.getgrgid(pwd.getpwnam("nobody").pw_gid).gr_name
    for unit in ("watchkeeper.service", "watchkeeper-sweep.service"):
        lines = (tmp_path / "units" / unit).read_text().splitlines()
        assert "User=nobody" in lines and f"Group={group}" in lines and "UMask=0077" in lines
    assert f"runs as user nobody (group {group})" in res.output.splitlines()


def test_as_root_without_sudo_it_refuses_to_run_every_job_as_root(tmp_path, monkeypatch):
    monkeypatch.setattr("console.cli.service.os.geteuid", lambda: 0)
    monkeypatch.delenv("SUDO_USER", raising=False)
    res = _install(tmp_path, run_as=None)
    assert res.exit_code == 2
    assert res.stderr == ("error: a system unit would run the runner and every job as root: pass --run-as USER"
                          " (the account they run as), or --run-as root to mean it\n")
    assert not (tmp_path / "units").exists()


def test_run_as_root_is_explicit_and_said(tmp_path):
    res = _install(tmp_path, run_as="root")
    assert res.exit_code == 0, res.output
    unit = (tmp_path / "units" / "watchkeeper.service").read_text().splitlines()
    assert "User=root" in unit and "UMask=0077" in unit
    assert any(ln.startswith("# Runs as root because --run-as root was given") for ln in unit)
    assert ("runs as user root (group root): the runner and every job without its own `user` run as root"
            " (--run-as root)") in res.output.splitlines()


def test_a_user_unit_has_no_user_line_but_keeps_the_umask(tmp_path):
    res = _install(tmp_path, "--user")
    assert res.exit_code == 0, res.output
    unit = (tmp_path / "units" / "watchkeeper.service").read_text().splitlines()
    assert "UMask=0077" in unit and not any(ln.startswith("User=") for ln in unit)
    assert "systemctl --user link" in res.output


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_system_units_with_a_user_pass_systemd_analyze_verify(tmp_path):
    # Any ordinary account ('nobody' itself draws systemd's "special user" warning).
    account = next((p.pw_name for p in pwd.getpwall() if 0 < p.pw_uid < 65534), None)
    if account is None:
        pytest.skip("no ordinary account on this machine")
    assert _install(tmp_path, run_as=account).exit_code == 0
    files = sorted(str(p) for p in (tmp_path / "units").iterdir())
    res = subprocess.run(["systemd-analyze", "verify", *files], capture_output=True, text=True, timeout=60)
    complaints = [ln for ln in res.stderr.splitlines() if str(tmp_path) in ln]
    assert res.returncode == 0 and not complaints, res.stderr


def test_now_without_systemd_says_so_in_one_line_and_points_to_cron(tmp_path, monkeypatch):
    monkeypatch.setattr("console.cli.service.systemd_running", lambda: False)
    res = _install(tmp_path, "--now")
    assert res.exit_code == 1
    assert len(res.stderr.splitlines()) == 1
    assert res.stderr.startswith("error: --now needs systemd, which is not running on this machine")
    assert "`watchkeeper service install --cron` prints its line" in res.stderr
    assert not (tmp_path / "units").exists()  # nothing half done


def test_unit_dir_in_the_systemd_folder_needs_no_link(tmp_path, monkeypatch):
    monkeypatch.setattr("console.cli.service._unit_dir",
                        lambda user, unit_dir: tmp_path / "units")  # the folder systemd searches
    res = _install(tmp_path)
    assert res.exit_code == 0, res.output
    assert "then: systemctl daemon-reload && systemctl enable --now watchkeeper.service watchkeeper-sweep.timer" \
        in res.output.splitlines()
