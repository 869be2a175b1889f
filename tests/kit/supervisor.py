"""Helpers for supervisor tests: a job row and runs driven through core.ledger.lifecycle.

Runs are inserted ``queued`` and moved with ``lifecycle.transition`` exactly as the runner
would, so the tests never write a run state by hand.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from core.ledger import lifecycle, outcomes, runs
from core.ledger.connection import Ledger
from core.ledger.lifecycle import State
from core.spec.model import JobSpec, spec_json
from core.supervisor.policy.retry import RETRY
from core.vocabulary import EndReason


def add_job(ledger: Ledger, folder: Path, name: str = "job", **spec_fields: Any) -> JobSpec:
    spec = JobSpec(name=name, command=spec_fields.pop("command", "true"), **spec_fields)
    source = folder / f"{name}.toml"
    source.write_text(f'name = "{name}"\ncommand = "true"\n')
    ledger.write(lambda c: c.execute(
        "INSERT INTO jobs (name, kind, spec, spec_hash, source, owner, intent, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, spec = excluded.spec,"
        " spec_hash = excluded.spec_hash, source = excluded.source, owner = excluded.owner,"
        " intent = excluded.intent, updated_at = excluded.updated_at",
        (name, spec.kind, spec_json(spec), spec.spec_hash(), str(source), spec.owner, spec.intent, time.time())))
    return spec


def new_run(ledger: Ledger, job: str = "job", *, attempt: int = 1, lineage: str | None = None,
            artifacts_dir: Path | None = None) -> int:
    lineage = lineage or uuid.uuid4().hex
    now = time.time()

    def tx(c):
        run_id = runs.create(c, job=job, slot=f"manual:{lineage}", trigger="manual", actor="test", not_before=now,
                             spec_hash=None, attempt=attempt, lineage=lineage, now=now)
        if artifacts_dir:  # the runner records the folder on the move to spawned
            assert lifecycle.apply(c, run_id, attempt, State.QUEUED, State.SPAWNED, actor="test", at=now,
                                   fields={"spawned_at": now, "artifacts_dir": str(artifacts_dir)})
        return run_id
    return ledger.write(tx)


def to_verifying(ledger: Ledger, run_id: int, *, exit_code: int | None = 0, signal: int | None = None,
                 duration_s: float = 1.0, stdout: str = "", stderr: str = "",
                 handoff: dict[str, Any] | None = None, findings: list[dict[str, str]] | None = None,
                 started_at: float | None = None) -> None:
    """queued → spawned → running → verifying, inserting the provisional outcome like the runner."""
    row = ledger.one("SELECT attempt, state FROM runs WHERE id = ?", (run_id,))
    att = row["attempt"]
    start = started_at if started_at is not None else time.time() - duration_s
    if row["state"] == State.QUEUED:  # new_run with an artifacts folder has spawned it already
        assert lifecycle.transition(ledger, run_id, att, State.QUEUED, State.SPAWNED, actor="test",
                                    fields={"spawned_at": start})
    assert lifecycle.transition(ledger, run_id, att, State.SPAWNED, State.RUNNING, actor="test",
                                fields={"started_at": start, "pid": 1})
    if findings is None:
        findings = [] if handoff is not None else [{"code": "missing", "message": "no handoff written"}]

    def then(c):
        outcomes.record(c, run_id, state="verifying", status="provisional", exit_code=exit_code, signal=signal,
                        duration_s=duration_s, stdout_head=stdout[:2000], stdout_tail=stdout[-2000:],
                        stderr_head=stderr[:2000], stderr_tail=stderr[-2000:], stdout_bytes=len(stdout),
                        stderr_bytes=len(stderr), handoff_raw=json.dumps(handoff) if handoff else None,
                        handoff=handoff, handoff_findings=findings)
    assert lifecycle.transition(ledger, run_id, att, State.RUNNING, State.VERIFYING, actor="test",
                                fields={"exit_code": exit_code, "signal": signal}, then=then)


def end_as(ledger: Ledger, run_id: int, to_state: str, *, retry: bool = False) -> None:
    """Move a running run to a terminal state directly (timed_out / orphaned)."""
    from core.ledger import retries
    att = ledger.one("SELECT attempt FROM runs WHERE id = ?", (run_id,))["attempt"]

    def then(c):
        outcomes.record(c, run_id, state=to_state, status=to_state, reason=to_state)
        if retry:
            retries.follow_up(c, run_id, to_state, actor="test", policy=RETRY)
    assert lifecycle.transition(ledger, run_id, att, State.QUEUED, State.SPAWNED, actor="test")
    assert lifecycle.transition(ledger, run_id, att, State.SPAWNED, State.RUNNING, actor="test",
                                fields={"started_at": time.time() - 5})
    code = {State.TIMED_OUT: EndReason.TIMEOUT, State.ORPHANED: EndReason.LEASE_EXPIRED}.get(State(to_state),
                                                                                      EndReason.EXIT_CODE)
    assert lifecycle.transition(ledger, run_id, att, State.RUNNING, to_state, actor="test", reason_code=code,
                                reason=to_state,
                                then=then)


def escalations_of(ledger: Ledger, job: str = "job") -> list[dict[str, Any]]:
    return [dict(r) for r in ledger.query("SELECT * FROM escalations WHERE job = ? ORDER BY id", (job,))]
