"""A ledger or artifacts folder that cannot be created or written (read-only file system,
permission denied, full disk) gives one line naming the path and the cause, and exit 2 —
never a traceback. Real file systems: a read-only bind mount and a full tmpfs in a private
mount namespace (``unshare -m``), and permission checks applied to root by dropping
CAP_DAC_OVERRIDE (``setpriv``); each case is skipped where the machine cannot set it up."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.ledger.connection import Ledger

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SPECS = 'name = "tick"\ncommand = ["true"]\nevery = "1h"\n'


def _can(*argv: str) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


NAMESPACES = _can("unshare", "-m", "true")
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="needs unshare -m (mount namespaces)")


def cli_line(prefix: str) -> str:
    return f"{prefix} {shlex.quote(PY)} -m console.cli"


def in_namespace(setup: str, commands: list[str]) -> list[tuple[int, str, str]]:
    """Run ``setup`` (mounts) then each CLI command in one private mount namespace; return
    (exit code, stdout, stderr) per command."""
    outs = []
    for i, _ in enumerate(commands):
        Path(f"/tmp/wk-bad-{os.getpid()}-{i}.err").unlink(missing_ok=True)
    script = "set -e\n" + setup + "\nset +e\n" + "\n".join(
        f"{c} </dev/null >/tmp/wk-bad-{os.getpid()}-{i}.out 2>/tmp/wk-bad-{os.getpid()}-{i}.err;"
        f" echo $? >/tmp/wk-bad-{os.getpid()}-{i}.rc" for i, c in enumerate(commands))
    res = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    for i, _ in enumerate(commands):
        base = f"/tmp/wk-bad-{os.getpid()}-{i}"
        outs.append((int(Path(f"{base}.rc").read_text()), Path(f"{base}.out").read_text(),
                     Path(f"{base}.err").read_text()))
        for ext in ("rc", "out", "err"):
            Path(f"{base}.{ext}").unlink(missing_ok=True)
    return outs


def assert_one_line(result: tuple[int, str, str], path: Path, cause: str) -> None:
    rc, out, err = result
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert str(path) in lines[0] and cause in lines[0], lines[0]


@pytest.fixture
def specs(tmp_path):
    d = tmp_path / "jobs"
    d.mkdir()
    (d / "jobs.toml").write_text(SPECS)
    return d


@pytest.mark.slow
@needs_namespaces
def test_read_only_file_system(tmp_path, specs):
    ro = tmp_path / "ro"
    ro.mkdir()
    Ledger(ro / "wk.db").close()  # an existing ledger on what becomes read-only media
    fresh = ro / "sub" / "new.db"
    setup = f"mount --bind {ro} {ro}\nmount -o remount,bind,ro {ro}"
    cmds = [f"{cli_line('')} run {specs} --ledger {ro / 'wk.db'}",
            f"{cli_line('')} up {specs} --ledger {ro / 'wk.db'}",
            f"{cli_line('')} run {specs} --ledger {fresh}",
            f"{cli_line('')} sweep --ledger {ro / 'wk.db'}",
            f"{cli_line('')} console --ledger {ro / 'wk.db'}"]
    run_, up, new, sweep, console = in_namespace(setup, cmds)
    assert_one_line(run_, ro, "Read-only file system")
    assert_one_line(up, ro, "Read-only file system")
    assert_one_line(new, fresh.parent, "Read-only file system")
    assert_one_line(sweep, ro / "wk.db", "read-only")
    assert_one_line(console, ro / "wk.db", "read-only")


@pytest.mark.slow
@needs_namespaces
def test_full_disk(tmp_path, specs):
    full = tmp_path / "full"
    full.mkdir()
    ok = tmp_path / "ok"
    ok.mkdir()
    (ok / "watchkeeper.toml").write_text(f'artifacts = "{full / "art"}"\n')
    setup = (f"mount -t tmpfs -o size=256k tmpfs {full}\n"
             f"dd if=/dev/zero of={full}/filler bs=4k count=1000 2>/dev/null || true")
    # The second runner is stopped once it says it runs (not after a fixed time: a loaded
    # machine may still be importing then). SIGTERM: a background job of a non-interactive
    # sh ignores SIGINT. Its banner comes just before its event loop installs the signal
    # handlers, so a SIGTERM in between ends it by the default action (143): either is fine
    # here, a traceback is not.
    err = f"/tmp/wk-bad-{os.getpid()}-1.err"
    runner = f"{cli_line('')} run {specs} --ledger {ok / 'wk.db'} --config {ok / 'watchkeeper.toml'}"
    cmds = [f"{cli_line('')} run {specs} --ledger {full / 'wk.db'}",
            f"{{ {runner} & pid=$!; i=0; until grep -q 'Ctrl-C to stop' {err} || [ $i -ge 1000 ];"
            f" do sleep 0.1; i=$((i+1)); done; sleep 1; kill -TERM $pid; wait $pid; }}"]
    ledger_full, artifacts_full = in_namespace(setup, cmds)
    assert_one_line(ledger_full, full, "No space left on device")
    # A full artifacts disk is one warning line: the ledger still records every run, so the
    # runner starts instead of leaving the jobs unwatched.
    rc, out, said = artifacts_full
    assert rc in (0, 143) and "Traceback" not in out + said and "Ctrl-C to stop" in said, said
    (warning,) = [ln for ln in said.splitlines() if ln.startswith("warning:")]
    assert str(full / "art") in warning and "No space left on device" in warning


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not _can("setpriv", "--bounding-set=-dac_override", "true"),
                    reason="as root, needs setpriv to drop CAP_DAC_OVERRIDE")
def test_permission_denied(tmp_path, specs):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    drop = "setpriv --bounding-set=-dac_override,-dac_read_search --inh-caps=-dac_override,-dac_read_search"
    for argv, path in ((["run", str(specs), "--ledger", str(locked / "wk.db")], locked),
                       (["up", str(specs), "--ledger", str(locked / "wk.db")], locked),
                       (["run", str(specs), "--ledger", str(tmp_path / "wk.db"),
                         "--config", str(_config(tmp_path, locked / "art"))], locked / "art")):
        res = subprocess.run([*drop.split(), PY, "-m", "console.cli", *argv], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert_one_line((res.returncode, res.stdout, res.stderr), path, "Permission denied")


def _config(tmp: Path, artifacts: Path) -> Path:
    cfg = tmp / "watchkeeper.toml"
    cfg.write_text(f'artifacts = "{artifacts}"\n')
    return cfg
