"""Operator actions shared by the screens: ask first (``ConfirmScreen``), then call
``core.actions`` on the action thread, attributed to the console's operator, and say what
happened. Every message is our text plus sanitised ledger text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from textual.screen import Screen

from console.context import ConsoleApp
from console.labels import label
from console.safe_text import escaped, escaped_line
from console.screens.dialogs import ConfirmScreen
from core import actions
from core.ledger.lifecycle import TERMINAL
from core.ledger.sql_store import SqlStore
from core.vocabulary import ActionResult

After = Callable[..., Awaitable[Any]]


def _run(screen: Screen, question: str, detail: str, verb: str, call: Callable[[Any, str], ActionResult],
         after: After, before: Callable[[], None] | None = None) -> None:
    app = cast(ConsoleApp, screen.app)

    async def answered(yes: bool | None) -> None:
        if not yes:
            return
        op = app.config.operator
        if before is not None:
            before()
        try:
            result = await app.actor.call(lambda ledger: call(ledger, op))
        except Exception as exc:
            screen.notify(escaped(f"{verb} failed: {exc}"), severity="error", markup=False)
            await after(force=True)
            return
        screen.notify(escaped(result.message), severity="information" if result.ok else "warning", markup=False)
        await after(force=True)

    screen.app.push_screen(ConfirmScreen(question, detail), answered)


def refuse_read_only(screen: Screen) -> bool:
    """True (and says so) when the console is read-only."""
    if cast(ConsoleApp, screen.app).config.read_only:
        screen.notify("read-only console: actions are disabled (--read-only)", severity="warning", markup=False)
        return True
    return False


def confirm_run_action(screen: Screen, verb: str, run_id: int, job: str, after: After,
                       before: Callable[[], None] | None = None) -> None:
    """Ask, then retry or abandon ``run_id`` and report the result.

    ``before()`` runs once confirmed, before the write; ``after(force=True)`` re-reads once
    done (also when the action failed)."""
    if verb == "retry":
        question = f"Retry {escaped_line(job, 40)} (run {run_id})?"
        detail = "Queues a new attempt of this run's lineage."
        fn = actions.retry
    else:
        # A finished run has nothing to abandon: say so up front instead of asking about a
        # process group that no longer exists (the state is read now, not from the row shown).
        _abandon_unless_ended(screen, run_id, job, after, before)
        return
    _run(screen, question, detail, verb, lambda ledger, op: fn(ledger, run_id, op), after, before)


def _abandon_unless_ended(screen: Screen, run_id: int, job: str, after: After,
                          before: Callable[[], None] | None) -> None:
    app = cast(ConsoleApp, screen.app)

    async def check() -> None:
        try:
            state = await app.reader.call(lambda ledger: SqlStore(ledger).run_state(run_id))
        except Exception:
            state = None  # unreadable now: ask anyway; core.actions.abandon refuses an ended run
        if state is not None and state in TERMINAL:
            screen.notify(f"{escaped_line(job, 40)} run {run_id} already ended ({label('run_state', state).text}):"
                          " nothing to abandon", severity="warning", markup=False)
            return
        question = f"Abandon {escaped_line(job, 40)} (run {run_id})?"
        detail = "Marks the run abandoned and kills its live process group. Every artifact is kept."
        _run(screen, question, detail, "abandon", lambda ledger, op: actions.abandon(ledger, run_id, op), after, before)

    screen.run_worker(check(), group="abandon-check", exit_on_error=False)


def confirm_job_action(screen: Screen, verb: str, job: str, after: After, *, paused: bool = False) -> None:
    """Ask, then pause / resume (``verb="pause"``; ``paused`` says which) or trigger
    (``verb="trigger"``) ``job`` through ``core.actions`` and report the result."""
    name = escaped_line(job, 40)
    if verb == "trigger":
        question, detail = f"Run {name} now?", "Queues a manual run (attempt 1); the runner starts it."
        fn: Callable[[Any, str], ActionResult] = lambda ledger, op: actions.trigger_job(ledger, job, op)  # noqa: E731
        verb_done = "run now"
    elif paused:
        question, detail = f"Resume {name}?", "Its next scheduled slot runs as usual (skipped slots are not replayed)."
        fn = lambda ledger, op: actions.resume_job(ledger, job, op)  # noqa: E731
        verb_done = "resume"
    else:
        question = f"Pause {name}?"
        detail = "Its scheduled slots are skipped (each recorded) until resumed; runs already started go on."
        fn = lambda ledger, op: actions.pause_job(ledger, job, op)  # noqa: E731
        verb_done = "pause"
    _run(screen, question, detail, verb_done, fn, after)


def job_controls_available() -> bool:
    """The ledger side of job pause / trigger (``core.actions.pause_job`` …) is present."""
    return all(hasattr(actions, f) for f in ("pause_job", "resume_job", "trigger_job"))
