"""Audit-event kinds and escalation kinds are closed sets, written only as their enums.

``core.vocabulary.AuditEvent`` names every kind of the ``events`` audit trail and
``EscalationKind`` every kind of escalation. This test reads every module of ``core/`` and
``console/`` and fails where a raw string (or an f-string) is passed as the kind to a writer of
events or escalations, or to a reader that looks one up: a typo there would write (or look for)
a kind nothing else knows, and no test of the set would notice.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.vocabulary import AuditEvent

ROOT = Path(__file__).resolve().parents[2]

#: Calls that write or look up an audit event or an escalation, with the positional indexes
#: where they take the kind (keyword ``kind=``/``event=`` always counts).
KIND_TAKERS: dict[str, tuple[int, ...]] = {
    "add_event": (),              # core.ledger.connection (keywords only)
    "record_event": (),           # Store.record_event
    "_event": (2,),               # core.ledger.escalations._event(conn, esc, kind, actor)
    "event": (1, 2),              # missions.event(conn, mission_id, kind) / MissionTx.event(mission_id, kind)
    "latest_event": (1,),         # Store.latest_event(run_id, kind)
    "latest": (2,),               # core.ledger.events.latest(conn, run_id, kind)
    "exists": (2,),               # core.ledger.events.exists(conn, run_id, kind)
    "create": (),                 # core.ledger.runs.create(..., event=)
    "move": (),                   # core.ledger.escalations.move(..., event=)
    "move_escalation": (),        # Store.move_escalation(..., event=)
    "_move_escalation": (),       # core.actions
    "raise_escalation": (),       # core.ledger.escalations / MissionTx
    "RaiseEscalation": (),        # core.ledger.records
}
KIND_KEYWORDS = frozenset({"kind", "event"})


def _is_raw_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def raw_kind_sites(source: str) -> list[tuple[int, str]]:
    """``(line, call)`` for every call in ``source`` that passes a raw string as a kind."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in KIND_TAKERS:
            continue
        args = [kw.value for kw in node.keywords if kw.arg in KIND_KEYWORDS]
        args += [node.args[i] for i in KIND_TAKERS[name] if i < len(node.args)]
        if any(_is_raw_string(a) for a in args):
            found.append((node.lineno, name))
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(p for pkg in ("core", "console") for p in (ROOT / pkg).rglob("*.py"))


def test_the_check_finds_each_raw_kind():
    bad = '''
add_event(conn, actor=a, kind="spec_error", job=None)
store.record_event(actor=a, kind="abandon_kill", run_id=1)
RaiseEscalation(kind="late_result", severity="warning", reason=r)
add_event(conn, actor=a, kind=f"breaker_{new}", job=j)
t.event(mid, "mission_answer", actor=a)
ml.event(conn, mid, "mission_turn", actor=a)
store.latest_event(run_id, "transition")
runs.create(conn, job=j, event="manual_retry", actor=a)
escalations.raise_escalation(conn, job=j, kind="circuit_open", severity="warning")
'''
    assert [line for line, _ in raw_kind_sites(bad)] == [2, 3, 4, 5, 6, 7, 8, 9, 10]


def test_the_check_lets_enums_and_other_strings_pass():
    fine = '''
add_event(conn, actor="supervisor", kind=AuditEvent.VERDICT, reason="routine")
_event(conn, esc, AuditEvent.ESCALATION_REOPENED, "supervisor", to_state="open")
t.event(mid, AuditEvent.MISSION_ANSWER, actor=a, reason="use the 2024 figures")
RaiseEscalation(kind=EscalationKind.LATE_RESULT, severity="warning", reason="late")
kind = AuditEvent.JOB_PAUSED if paused else AuditEvent.JOB_RESUMED
add_event(conn, actor=a, kind=kind)
'''
    assert raw_kind_sites(fine) == []


def test_every_audit_event_kind_is_its_own_word():
    values = [e.value for e in AuditEvent]
    assert len(values) == len(set(values)) == len(AuditEvent.__members__)
    assert all(v == v.lower() and " " not in v for v in values)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_passes_a_raw_kind(path: Path):
    sites = raw_kind_sites(path.read_text(encoding="utf-8"))
    assert not sites, "; ".join(f"{path.relative_to(ROOT)}:{line}: raw string kind to {name}()"
                                for line, name in sites)
