"""HOST:PORT addresses for the servers the CLI starts (the web console, the metrics)."""

from __future__ import annotations

import ipaddress
import socket


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


#: Addresses that mean "every interface of this machine".
WILDCARDS = ("0.0.0.0", "::", "")


def url_host(host: str, *, fqdn: str | None = None, hostname: str | None = None) -> str:
    """The host to print in a URL for a server bound to ``host``: the host itself (in
    brackets for IPv6); for a wildcard bind (0.0.0.0, ::) this machine's name as others reach
    it — its fully qualified name (``socket.getfqdn``) unless that is only ``localhost``
    (an /etc/hosts that maps the hostname to 127.0.0.1), then ``socket.gethostname``.
    ``fqdn`` and ``hostname`` stand in for the two lookups (tests)."""
    if host not in WILDCARDS:
        return f"[{host}]" if ":" in host else host
    fqdn = socket.getfqdn() if fqdn is None else fqdn
    if fqdn and not _loopback_name(fqdn):
        return fqdn
    hostname = socket.gethostname() if hostname is None else hostname
    return hostname if hostname and not _loopback_name(hostname) else fqdn or "localhost"


def _loopback_name(name: str) -> bool:
    return name == "localhost" or name.startswith("localhost.") or is_loopback(name)
