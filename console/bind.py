"""HOST:PORT addresses for the servers the CLI starts (the web console, the metrics)."""

from __future__ import annotations

import ipaddress


class BindError(ValueError):
    """An address that is not HOST:PORT; the message names it and shows the form."""


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) → (host, port). Raises ``BindError``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BindError(f"{text}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    host = host.strip("[]")
    if not host:
        raise BindError(f"{text}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
