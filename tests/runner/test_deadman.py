"""``[deadman] url``: the runner pings it every heartbeat (Healthchecks / Cronitor protocol:
a GET of the URL, ``<url>/fail`` while the heartbeat cannot be written), tested against a
local HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Iterator

import pytest

from core.runner.deadman import Deadman, ping_url
from core.spec.settings import load_settings
from tests.kit.harness import RunnerThread, fast_settings, wait_for, write_specs


class _Pings(http.server.BaseHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Pings", (_Pings,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ping/abc", seen
    finally:
        server.shutdown()
        server.server_close()


def test_ping_and_fail_follow_the_protocol(service):
    url, seen = service
    man = Deadman(url, timeout=5)
    assert man.ping(ok=True) and man.ping(ok=False)
    assert seen == ["/ping/abc", "/ping/abc/fail"]
    assert ping_url(url + "/", ok=False) == url + "/fail"


def test_unreachable_service_is_logged_once_not_every_beat(caplog):
    man = Deadman("http://127.0.0.1:9/nowhere", timeout=1)  # discard port: nothing listens
    with caplog.at_level(logging.WARNING, logger="core.runner.deadman"):
        assert not man.ping() and not man.ping()
    assert len([r for r in caplog.records if "dead man's switch" in r.getMessage()]) == 1


def test_no_url_pings_nothing():
    assert Deadman(None).ping() is False


def test_deadman_url_must_be_http():
    with pytest.raises(ValueError, match="not an http"):
        load_settings(None, deadman={"url": "ftp://example.com/x"})


@pytest.mark.slow
def test_a_runner_pings_every_heartbeat(tmp_path, service):
    url, seen = service
    specs = tmp_path / "jobs"
    write_specs(specs, "")
    settings = fast_settings(tmp_path, deadman={"url": url})
    with RunnerThread(specs, settings):
        wait_for(lambda: len(seen) >= 3)
    assert set(seen) == {"/ping/abc"}  # the ledger is writable: never /fail
