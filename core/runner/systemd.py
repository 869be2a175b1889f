"""systemd's notify protocol for the runner (``Type=notify`` with ``WatchdogSec``), via sdnotify.

``ready()`` once the runner has registered and loaded its specs (``READY=1``); ``alive()``
from every heartbeat (``WATCHDOG=1`` plus a ``STATUS=`` line), so systemd restarts a runner
whose event loop stopped turning; ``stopping()`` when a clean stop begins. Outside systemd
(no ``NOTIFY_SOCKET``) every call does nothing.
"""

from __future__ import annotations

import os

import sdnotify


class ServiceNotifier:
    """Speaks to systemd when started by it; silent otherwise."""

    def __init__(self) -> None:
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        self._notifier = sdnotify.SystemdNotifier() if self.enabled else None

    def _send(self, message: str) -> None:
        if self._notifier is not None:
            self._notifier.notify(message)

    def ready(self, status: str = "running jobs") -> None:
        """``READY=1``: systemd considers the service started."""
        self._send(f"READY=1\nSTATUS={status}")

    def alive(self, status: str | None = None) -> None:
        """``WATCHDOG=1``: the heartbeat loop turned; ``status`` shows in ``systemctl status``."""
        self._send("WATCHDOG=1" + (f"\nSTATUS={status}" if status else ""))

    def stopping(self) -> None:
        """``STOPPING=1``: a clean stop began (running jobs get their shutdown grace)."""
        self._send("STOPPING=1\nSTATUS=stopping")
