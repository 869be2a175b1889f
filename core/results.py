"""The result of an operator action (acknowledge, snooze, resolve, retry, abandon)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ActionResult:
    """What an operator action did.

    ``ok`` is False when the action lost a race or was refused; ``message`` is one line for
    the operator, e.g. "already acknowledged by ana at 04:12 UTC"; ``missing`` is True when
    the target (escalation or run id) does not exist at all (the CLI exits 2 then, not 1).
    """

    ok: bool
    message: str
    target_id: int | None = None
    missing: bool = False
