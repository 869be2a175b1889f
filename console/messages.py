"""Messages passed between the console's widgets and screens."""

from __future__ import annotations

from textual.message import Message


class NeedMore(Message):
    """A paged table's cursor neared the end of what is loaded; read the next page of ``view``."""

    def __init__(self, view: str) -> None:
        super().__init__()
        self.view = view


class OpenRow(Message):
    """The operator pressed enter on a row of ``view``; ``key`` is that row's key."""

    def __init__(self, view: str, key: str) -> None:
        super().__init__()
        self.view = view
        self.key = key
