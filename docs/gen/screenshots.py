"""`make screenshots`: the manual's console pictures, taken from the real console.

Runs the sample jobs with a real runner on a fresh ledger until the supervisor has opened a
few escalations (at most ``--seconds``), then opens the console headless at 100×30 and saves
Textual's own SVG export of each view into docs/images/. Nothing here is drawn by hand; run it
again after the console changes.

    python docs/gen/screenshots.py [--seconds 90] [--out docs/images]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIZE = (100, 30)
#: file name → keys pressed before the picture (on the main screen)
VIEWS = {"console.svg": "1", "outcomes.svg": "2", "jobs.svg": "4"}


def open_escalations(ledger: Path) -> int:
    from core.ledger.connection import Ledger
    from core.ledger.escalations import list_escalations

    if not ledger.exists():
        return 0
    try:
        db = Ledger(ledger, read_only=True)
    except Exception:  # the runner is still creating it
        return 0
    try:
        return len(list_escalations(db, "open"))
    except Exception:  # the runner is still creating the schema
        return 0
    finally:
        db.close()


def run_sample_jobs(ledger: Path, seconds: float, want: int, out: Path) -> list[Path]:
    """A real runner on sample_jobs/ until ``want`` escalations are open (or ``seconds``);
    the pictures are taken while it still runs, so the header shows a live runner."""
    watchkeeper = Path(sys.executable).with_name("watchkeeper")
    shutil.rmtree(ROOT / "sample_jobs" / "out", ignore_errors=True)
    proc = subprocess.Popen([str(watchkeeper), "run", "sample_jobs", "--ledger", str(ledger), "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and open_escalations(ledger) < want:
            if proc.poll() is not None:
                raise SystemExit(f"the runner exited early ({proc.returncode})")
            time.sleep(1)
        return asyncio.run(take(ledger, out))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def take(ledger: Path, out: Path) -> list[Path]:
    from console.app import ConsoleConfig, WatchkeeperApp

    app = WatchkeeperApp(ConsoleConfig(ledger=ledger, operator="ana", read_only=False, theme="dark",
                                       refresh=0.25))
    saved = []
    async with app.run_test(size=SIZE) as pilot:
        for name, keys in VIEWS.items():
            await pilot.press(*keys)
            # a few polls, so the view has read and drawn its rows
            for _ in range(12):
                await pilot.pause(0.1)
            path = out / name
            app.save_screenshot(filename=name, path=str(out))
            saved.append(path)
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90, help="longest the sample jobs run")
    parser.add_argument("--escalations", type=int, default=5, help="open escalations to wait for")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wk-shots-") as tmp:
        ledger = Path(tmp) / "watchkeeper.db"
        for path in run_sample_jobs(ledger, args.seconds, args.escalations, args.out):
            print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
