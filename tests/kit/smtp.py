"""A local SMTP server (aiosmtpd) that keeps every message it receives, for email
notification tests that never reach the network."""

from __future__ import annotations

import email
import email.policy
import socket
import threading
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Mailbox:
    """Messages received, parsed (``email.message.EmailMessage``); ``arrived`` is set on each."""

    messages: list[email.message.EmailMessage] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        self.arrived.set()
        return "250 OK"

    def text(self, i: int = -1) -> str:
        """Subject and plain-text body of message ``i``."""
        msg = self.messages[i]
        part = msg.get_body(preferencelist=("plain",))
        return f"{msg['subject']}\n{part.get_content() if part else ''}"


class SmtpServer:
    """Started on a free port of 127.0.0.1; ``url`` is an Apprise ``mailto://`` URL for it."""

    def __init__(self, to: str = "ops@example.com") -> None:
        self.box = Mailbox()
        self.port = _free_port()
        self.controller = Controller(self.box, hostname="127.0.0.1", port=self.port)
        self.controller.start()
        self.url = f"mailto://127.0.0.1:{self.port}?from=watchkeeper@example.com&to={to}&mode=insecure"

    def stop(self) -> None:
        self.controller.stop()
