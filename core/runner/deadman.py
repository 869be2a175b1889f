"""The dead man's switch: a URL the runner pings every heartbeat (``[deadman] url``).

The Healthchecks.io / Cronitor ping protocol: an HTTP GET of the URL says "alive"; a GET of
``<url>/fail`` says "alive but failing" (here: the heartbeat could not be written to the
ledger). When the pings stop — the host died, the runner died, the network is gone — the
service pages from outside, which is what a single host without a fleet needs: nothing on a
dead host can report its own death.

A ping never blocks the heartbeat (the runner sends it from a pool thread, one at a time) and
its failure is only logged, once per change: the ledger, not the ping, is the record.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request

from core import __version__

log = logging.getLogger(__name__)


def ping_url(url: str, *, ok: bool) -> str:
    """The URL to GET: ``url`` itself when ``ok``, else ``url`` + ``/fail`` (the protocol's
    failure signal; a trailing ``/`` on ``url`` is not doubled)."""
    return url if ok else url.rstrip("/") + "/fail"


class Deadman:
    """Pings ``url`` (None: does nothing) with ``timeout`` seconds per ping. ``ping`` returns
    whether the service answered 2xx; the first failure and the recovery are logged, not
    every beat."""

    def __init__(self, url: str | None, *, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout
        self._failing = False

    def ping(self, *, ok: bool = True) -> bool:
        if not self.url:
            return False
        target = ping_url(self.url, ok=ok)
        req = urllib.request.Request(target, headers={"User-Agent": f"watchkeeper/{__version__}"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 (http(s) only: settings check it)
                good = 200 <= resp.status < 300
                detail = f"HTTP {resp.status}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            good, detail = False, str(getattr(exc, "reason", exc))
        if not good and not self._failing:
            log.warning("dead man's switch: ping to %s failed (%s); retried every heartbeat", self.url, detail)
        elif good and self._failing:
            log.info("dead man's switch: pings to %s get through again", self.url)
        self._failing = not good
        return good
