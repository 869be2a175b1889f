"""``watchkeeper service install|uninstall``: run the runner under systemd, watched from outside.

``install`` writes three units: ``NAME.service`` (the runner: ``Type=notify``, ``Restart=always``,
``WatchdogSec``; the runner signals readiness and pings the watchdog from its heartbeat), and
``NAME-sweep.service`` + ``NAME-sweep.timer`` running ``watchkeeper sweep`` every minute as the
outside watcher (a dead or wedged runner is noticed, its runs orphaned, the owner told). With
``--cron`` it prints a cron line for the sweep instead of the timer.

A system unit never runs the runner (and so every job) as root by default: ``User=``/``Group=``
name the invoking user (``SUDO_USER`` under sudo), or ``--run-as USER``; root only with
``--run-as root``, said aloud. ``UMask=0077`` keeps the ledger and artifacts private.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from console.cli.common import (
    EXIT_FINDINGS,
    EXIT_USAGE,
    fail,
    open_settings,
)
from core.spec.settings import CONFIG_NAME, Settings

SWEEP_EVERY_S = 60


@click.group("service")
def service_group() -> None:
    """Install or remove the systemd units that run Watchkeeper as a service.

    \b
    Example:
      watchkeeper service install --user --now ~/jobs   # runner unit + sweep timer, started
      watchkeeper service uninstall --user              # remove both (the ledger stays)
    """


def _unit_dir(user: bool, unit_dir: str | None) -> Path:
    if unit_dir:
        return Path(unit_dir)
    if user:
        return Path.home() / ".config" / "systemd" / "user"
    return Path("/etc/systemd/system")


def _watchkeeper() -> str:
    argv0 = Path(sys.argv[0])
    if argv0.name == "watchkeeper" and argv0.exists():
        return str(argv0.resolve())
    return shutil.which("watchkeeper") or str(Path(sys.executable).parent / "watchkeeper")


def _q(value: str) -> str:
    # ExecStart takes shell-like quotes; '%' starts a systemd specifier and '$' a variable.
    return shlex.quote(value).replace("%", "%%").replace("$", "$$")


def watchdog_s(settings: Settings) -> int:
    """``WatchdogSec``: several heartbeats, never under 30 s, so one slow beat never restarts."""
    return int(max(30, 4 * settings.heartbeat))


@dataclass(frozen=True)
class RunAs:
    """The account a system unit runs as (``User=``/``Group=``); None for a user unit."""

    user: str
    group: str
    uid: int


def _account(name: str) -> RunAs:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        fail(f"--run-as {name!r}: no such user on this machine", EXIT_USAGE)
    try:
        group = grp.getgrgid(pw.pw_gid).gr_name
    except KeyError:
        group = str(pw.pw_gid)
    return RunAs(pw.pw_name, group, pw.pw_uid)


def run_as(run_as_name: str | None) -> RunAs:
    """Who a system unit runs as: ``--run-as``, else the user who ran ``sudo``, else the
    invoking user when it is not root. Exits 2 when that would be root without asking."""
    if run_as_name:
        return _account(run_as_name)
    sudo_user = os.environ.get("SUDO_USER")
    if sudo_user and sudo_user != "root":
        return _account(sudo_user)
    if os.geteuid() != 0:
        return _account(pwd.getpwuid(os.geteuid()).pw_name)
    fail("a system unit would run the runner and every job as root: pass --run-as USER (the account "
         "they run as), or --run-as root to mean it", EXIT_USAGE)


def _identity(who: RunAs | None) -> str:
    """The unit lines naming who runs and the umask (``who`` None: a user unit, run as its user)."""
    lines = []
    if who is not None:
        if who.uid == 0:
            lines.append("# Runs as root because --run-as root was given: so does every job without its own `user`.")
        lines += [f"User={who.user}", f"Group={who.group}"]
    lines += ["# New files (ledger, artifacts, output) readable by this user only.", "UMask=0077"]
    return "\n".join(lines)


def runner_unit(name: str, spec_dir: Path, settings: Settings, exe: str, config: Path | None, user: bool,
                who: RunAs | None = None) -> str:
    """The runner's unit text (``NAME.service``); ``who``: ``User=``/``Group=`` of a system unit."""
    args = [exe, "run", str(spec_dir), "--ledger", str(settings.ledger), "--quiet"]
    if config is not None:
        args += ["--config", str(config)]
    return f"""[Unit]
Description=Watchkeeper runner for {spec_dir}
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={' '.join(_q(a) for a in args)}
WorkingDirectory={str(spec_dir).replace("%", "%%")}
{_identity(who)}
Environment=PYTHONUNBUFFERED=1
Restart=always
RestartSec=5
# The runner pings the watchdog from its heartbeat ({settings.heartbeat:g}s): a wedged runner is restarted.
WatchdogSec={watchdog_s(settings)}
# SIGTERM to the runner only: running jobs go on under their monitors, and the next runner
# (`systemctl restart`: the upgrade path) re-attaches them and records how they really ended.
KillMode=process
TimeoutStopSec={int(settings.shutdown_grace + 20)}

[Install]
WantedBy={'default.target' if user else 'multi-user.target'}
"""


def sweep_args(settings: Settings, exe: str, config: Path | None) -> list[str]:
    args = [exe, "sweep", "--ledger", str(settings.ledger)]
    if config is not None:
        args += ["--config", str(config)]
    return args


def sweep_units(name: str, settings: Settings, exe: str, config: Path | None, user: bool,
                who: RunAs | None = None) -> tuple[str, str]:
    """``NAME-sweep.service`` and ``NAME-sweep.timer``: the outside watcher, every minute."""
    service = f"""[Unit]
Description=Watchkeeper outside watcher: orphan sweep and runner gap for {settings.ledger}

[Service]
Type=oneshot
ExecStart={' '.join(_q(a) for a in sweep_args(settings, exe, config))}
{_identity(who)}
"""
    timer = f"""[Unit]
Description=Run the Watchkeeper sweep every minute (watches {name}.service from outside)

[Timer]
OnBootSec={SWEEP_EVERY_S}s
OnUnitActiveSec={SWEEP_EVERY_S}s
AccuracySec=5s

[Install]
WantedBy=timers.target
"""
    return service, timer


def systemd_running() -> bool:
    """True when systemd is this machine's init (``sd_booted``: ``/run/systemd/system`` exists)."""
    return Path("/run/systemd/system").is_dir()


def _systemctl(user: bool, *args: str) -> None:
    cmd = ["systemctl", *(["--user"] if user else []), *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        why = " ".join(res.stderr.split()) or f"exit {res.returncode}"
        fail(f"{' '.join(cmd)}: {why}", EXIT_FINDINGS)


def _no_systemd(spec_dir: Path) -> None:
    fail("--now needs systemd, which is not running on this machine (no /run/systemd/system); nothing was "
         f"written. Without systemd, start `watchkeeper run {shlex.quote(str(spec_dir))}` under your own "
         "supervisor and run the sweep from cron: `watchkeeper service install --cron` prints its line",
         EXIT_FINDINGS)


@service_group.command("install")
@click.argument("spec_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--user", "user", is_flag=True, help="A user unit (~/.config/systemd/user) instead of a system one.")
@click.option("--run-as", "run_as_name", default=None, metavar="USER",
              help="The account a system unit runs the runner and its jobs as [default: $SUDO_USER, else you]; "
                   "`--run-as root` to run them as root.")
@click.option("--name", default="watchkeeper", show_default=True, help="Unit name.")
@click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False), default=None,
              help="Ledger file [default: the settings' ledger resolved against SPEC_DIR, "
                   "e.g. SPEC_DIR/watchkeeper.db].")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Settings file [default: watchkeeper.toml in SPEC_DIR].")
@click.option("--unit-dir", type=click.Path(file_okay=False), default=None,
              help="Write the units here instead of the systemd folder (to inspect or package them; "
                   "`systemctl link` makes them known).")
@click.option("--cron", "cron", is_flag=True, help="No timer: print a cron line running the sweep instead.")
@click.option("--now", "now", is_flag=True, help="Also run systemctl daemon-reload and enable --now.")
def install_cmd(spec_dir: str, user: bool, run_as_name: str | None, name: str, ledger_path: str | None,
                config_path: str | None, unit_dir: str | None, cron: bool, now: bool) -> None:
    """Write the runner's systemd unit and the sweep timer for SPEC_DIR.

    A system unit runs as the user who ran sudo (User=, Group=), or --run-as USER; never as
    root unless asked with --run-as root. UMask=0077 keeps the ledger and artifacts private.

    \b
    Example:
      watchkeeper service install --user --now ~/jobs
      sudo watchkeeper service install --run-as backup --now /srv/jobs
      systemctl --user status watchkeeper
    """
    folder = Path(spec_dir).resolve()
    if now and not systemd_running():
        _no_systemd(folder)
    if user and run_as_name:
        fail("--run-as is for a system unit; a user unit (--user) runs as its own user", EXIT_USAGE)
    who = None if user else run_as(run_as_name)
    config = Path(config_path).resolve() if config_path else None
    if ledger_path is not None:
        settings = open_settings(str(folder), str(config) if config else None, ledger=ledger_path)
    else:
        # The unit runs `run SPEC_DIR` in SPEC_DIR (WorkingDirectory), so the settings' ledger
        # (watchkeeper.db by default) is resolved there, never in whatever folder install ran in.
        with contextlib.chdir(folder):
            settings = open_settings(str(folder), str(config) if config else None)
    if config is None and (folder / CONFIG_NAME).exists():
        # The sweep has no spec folder: it needs the file named to find the sinks it delivers to.
        config = folder / CONFIG_NAME
    exe = _watchkeeper()
    target = _unit_dir(user, unit_dir)
    try:
        target.mkdir(parents=True, exist_ok=True)
        files = {f"{name}.service": runner_unit(name, folder, settings, exe, config, user, who)}
        if not cron:
            svc, timer = sweep_units(name, settings, exe, config, user, who)
            files[f"{name}-sweep.service"] = svc
            files[f"{name}-sweep.timer"] = timer
        for fname, text in files.items():
            (target / fname).write_text(text)
            click.echo(f"wrote {target / fname}")
    except OSError as exc:
        fail(f"{target}: cannot write units ({exc.strerror or exc}); try --user or run as root")
    if who is not None:
        click.echo(f"runs as user {who.user} (group {who.group})" + (
            ": the runner and every job without its own `user` run as root (--run-as root)" if who.uid == 0 else ""))
        _warn_unwritable(Path(settings.ledger).parent, who)
    if cron:
        line = " ".join(shlex.quote(a) for a in sweep_args(settings, exe, config))
        click.echo("add this line to your crontab (crontab -e) as the outside watcher:")
        click.echo(f"* * * * * {line} >/dev/null 2>&1")
    units = [f"{name}.service"] + ([] if cron else [f"{name}-sweep.timer"])
    sc = "systemctl --user" if user else "systemctl"
    # A folder systemd does not search (--unit-dir): `systemctl link` makes the units known first.
    linked = unit_dir is not None and target.resolve() != _unit_dir(user, None).resolve()
    paths = [str(target.resolve() / f) for f in files]
    if now:
        if linked:
            _systemctl(user, "link", *paths)
        _systemctl(user, "daemon-reload")
        _systemctl(user, "enable", "--now", *units)
        click.echo(f"started {', '.join(units)}")
    else:
        link = f"{sc} link {' '.join(shlex.quote(p) for p in paths)} && " if linked else ""
        click.echo(f"then: {link}{sc} daemon-reload && {sc} enable --now {' '.join(units)}")


def _warn_unwritable(folder: Path, who: RunAs) -> None:
    """Say so when the ledger's folder is not the run-as user's to write (the runner would
    stop at its first write)."""
    try:
        st = folder.stat()
    except OSError:
        return
    if who.uid != 0 and st.st_uid != who.uid and not st.st_mode & 0o002:
        owner = str(st.st_uid)
        with contextlib.suppress(KeyError):
            owner = pwd.getpwuid(st.st_uid).pw_name
        click.echo(f"warning: {folder} belongs to {owner}: {who.user} must be able to write the ledger there"
                   f" (chown -R {who.user} {shlex.quote(str(folder))})", err=True)


@service_group.command("uninstall")
@click.option("--user", "user", is_flag=True, help="The user units (~/.config/systemd/user).")
@click.option("--name", default="watchkeeper", show_default=True, help="Unit name.")
@click.option("--unit-dir", type=click.Path(file_okay=False), default=None, help="Where the units were written.")
@click.option("--now", "now", is_flag=True, help="Also stop and disable them with systemctl first.")
def uninstall_cmd(user: bool, name: str, unit_dir: str | None, now: bool) -> None:
    """Remove the runner's unit and the sweep timer (the ledger and artifacts stay).

    \b
    Example:
      watchkeeper service uninstall --user --now        # stop, disable and remove all three units
      watchkeeper service uninstall --unit-dir /tmp/u   # remove units written with --unit-dir
    """
    target = _unit_dir(user, unit_dir)
    names = [f"{name}.service", f"{name}-sweep.service", f"{name}-sweep.timer"]
    if now:
        _systemctl(user, "disable", "--now", f"{name}.service", f"{name}-sweep.timer")
    removed = 0
    for fname in names:
        path = target / fname
        try:
            path.unlink()
            removed += 1
            click.echo(f"removed {path}")
        except FileNotFoundError:
            continue
        except OSError as exc:
            fail(f"{path}: cannot remove ({exc.strerror or exc})")
    if not removed:
        fail(f"no {name} units in {target}")
    if now:
        _systemctl(user, "daemon-reload")


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (service_group,)
