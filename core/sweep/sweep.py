"""The orphan sweep: no run stays ``spawned``/``running``/``verifying`` when nothing runs it.

A process cannot report its own death, so something outside it must. The sweep runs inside
every runner (``Sweeper.sweep_once`` every ``sweep_interval``), as ``watchkeeper sweep`` (one
pass, or ``--loop``), and once at runner start (``reconcile_startup``).

Policy, per live run (see docs/sweep.md):

* owned by the sweeping runner itself → skipped (that runner is the process's parent);
* owner runner ``alive`` (fresh heartbeat) → never touched;
* owner runner ``stalled`` (its process alive on this host, heartbeat stale) → not touched,
  reported in ``SweepReport.stalled_runners``;
* owner runner ``gone`` (or no owner recorded) and the run's lease expired (or, for a
  ``spawned`` run, its start deadline passed):

  - process not alive (pid + create time) → ``orphaned``; whatever the run started that is
    still in its recorded process group is killed first — only processes whose pgid is the
    recorded one AND whose environment carries the run's ``WATCHKEEPER_RUN_ID`` (so a reused
    pid or pgid never matches), recorded in the orphan move's detail and as a finding;
  - process alive → its process group is killed (SIGTERM, SIGKILL after the job's grace,
    capped) and the run ``orphaned``. Re-adoption is not offered: a non-child's exit status
    cannot be collected, so watching it would only ever yield a guess;
* at startup reconciliation the lease is not waited for: runs of ``gone`` runners are
  settled at once;
* a run a clean stop on *another* host left to its monitor → pending (a runner of that host
  re-attaches it), lease or not, until its own ``time_limit`` and a lease have passed (its
  monitor ends the job by then), at most ``LEFT_ELSEWHERE_S`` after the stop; then
  orphaned, reason ``interrupted``;
* a fan-out parent that is orphaned takes its still-queued sub-tasks with it (abandoned,
  reason ``parent_ended``, in the same transaction), and no sub-task of an ended parent is
  retried (``retries.follow_up``); sub-tasks left ``queued`` under an ended parent by a path
  that does not settle them (an operator's abandon) are settled by every pass.

Every move goes through ``core.ledger.lifecycle.apply`` (compare-and-set on state and attempt,
audited); the outcome record and the next attempt (``retries.follow_up``) commit in the same
transaction; ``supervisor.judge_run`` is called only after the commit. A write that fails
(locked beyond the pass's patience, read-only file) is reported in ``SweepReport.errors``
and simply happens again on the next pass, because nothing changed.

Pause detection: a ``Sweeper`` remembers wall and monotonic time at the end of its last pass.
If the gap exceeds ``max(2 × sweep_interval, sweep_interval + 1 s)`` or the two clocks disagree (process stopped, machine
asleep, clock jump), that pass declares nothing dead, appends a ``sweep_paused`` event, and
passes keep declaring nothing until one ``heartbeat`` has elapsed, so live runners can renew
their heartbeats and leases first.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import liveness, monitor
from core.ledger.connection import Ledger, StorageError
from core.ledger.lifecycle import LIVE, State
from core.ledger.records import Run, Runner
from core.ledger.sql_store import SqlStore
from core.liveness import RunnerLiveness
from core.processes import describe, signal_name, stop_group, stop_processes
from core.spec.model import JobSpec, spec_from_json
from core.supervisor import supervisor
from core.supervisor.policy.retry import RETRY
from core.vocabulary import AuditEvent, EndReason, SweepAction

log = logging.getLogger(__name__)

#: Longest a run left running by a clean stop on another host is trusted to its monitor
#: there, seconds after the stop: a day, as long as ``core.ledger.hosts.RETIRED_S`` keeps a
#: silent host in ``status`` (less when the run's own ``time_limit`` ends sooner). A runner
#: of that host re-attaches it long before.
LEFT_ELSEWHERE_S = 86400.0
#: Longest SIGTERM→SIGKILL wait the sweep grants a job of a gone runner, seconds.
DEFAULT_KILL_GRACE_CAP_S = 5.0

def _spec_of(ledger: Ledger, job: str) -> JobSpec | None:
    """The job's spec as the ledger keeps it (``jobs.spec``), None when unknown or unreadable."""
    try:
        row = SqlStore(ledger).job(job)
        return spec_from_json(row.spec) if row is not None else None
    except (StorageError, ValueError):
        return None


def reattachable(run: Run, owner: Runner | None, *, now: float, this_host: str) -> str | None:
    """Whether a runner of this host can take over the live run ``run`` left by the runner
    ``owner``: ``"running"`` (its monitor still runs the job), ``"ended"`` (the job ended
    while no runner was there and its monitor recorded how: ``core.monitor``),
    ``"verifying"`` (its outcome is recorded, its verdict is not), ``"fanout"`` (a fan-out
    parent: it has no process, only sub-tasks that are runs of their own), else None. Only
    runs of a runner of this host that is gone (stopped, or its process dead); never runs
    started by ``exec`` (no runner). Reads files and the process table; never writes."""
    if owner is None or not liveness.same_life(owner.hostname, owner.boot_id, this_host=this_host):
        return None
    if liveness.runner_liveness(owner, now=now, this_host=this_host) is not RunnerLiveness.GONE:
        return None
    if run.state == State.VERIFYING:
        return "verifying"
    if run.state != State.RUNNING or not run.artifacts_dir:
        return None
    if run.pid is None and not run.task:
        # Every other run a runner moves to running has its monitor's pid recorded in the same
        # move; a fan-out parent (core.runner.fanout) has none: it only waits on its sub-tasks,
        # which the ledger holds, so a new runner can take the waiting up where it stopped.
        return "fanout"
    art = Path(run.artifacts_dir)
    if monitor.monitor_alive(art):
        return "running"
    if monitor.exit_status(art) is not None:
        return "ended"
    return None


@dataclass
class SweepReport:
    """What one sweep pass did.

    ``orphaned``: run ids moved to ``orphaned`` (includes ``killed``). ``killed``: run ids
    whose still-alive process group was killed first. ``leftovers_killed``: run ids whose
    leader was dead but whose process group still held processes the run started (killed
    before the move). ``pending``: run ids of gone runners still inside their lease.
    ``stalled_runners``: runner ids with a live process but a stale heartbeat (their runs
    were left alone). ``settled_subtasks``: queued fan-out sub-tasks of ended parents
    abandoned by this pass. ``skipped_paused``: this pass declared nothing because the
    sweeper was paused. ``errors``: one line per failed write or kill (retried next pass).
    ``at``: Unix seconds of the pass.
    """

    at: float
    orphaned: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    leftovers_killed: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    stalled_runners: list[str] = field(default_factory=list)
    settled_subtasks: list[int] = field(default_factory=list)
    skipped_paused: bool = False
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "orphaned": self.orphaned, "killed": self.killed,
                "leftovers_killed": self.leftovers_killed, "pending": self.pending,
                "stalled_runners": self.stalled_runners, "settled_subtasks": self.settled_subtasks,
                "skipped_paused": self.skipped_paused, "errors": self.errors}


@dataclass
class LostReport:
    """What ``Sweeper.settle_lost`` did: ``orphaned`` run ids moved to ``orphaned``;
    ``finished`` run ids the caller can stop tracking (orphaned now, or already terminal,
    moved by someone else, or not owned by the caller). Ids in neither had a failed write
    (retried on the next call)."""

    orphaned: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Assessment:
    """The sweep's decision for one live run (not a supervisor verdict: the sweep judges
    whether a run still has an owner, not its work). ``action`` is a ``SweepAction``;
    ``reason`` (an ``EndReason``) is recorded on the run. ``local``: the run's processes
    are on this host, so they can be probed and killed."""

    action: SweepAction
    reason: EndReason | None = None
    local: bool = True


def time_limit(spec: JobSpec | None, run: Run) -> float | None:
    """The longest ``run`` may go on before its monitor ends it, runner or not: its task's
    or job's ``timeout`` (``budget.wall`` when shorter) plus the job's ``grace``, seconds;
    None without a spec."""
    if spec is None:
        return None
    return float(spec.run_timeout(run.task or "")[0] + spec.grace)


def assess(run: Run, owner: Runner | None, *, now: float, settings: Any,
           this_host: str, own_runner_id: str | None = None, settle_gone_now: bool = False,
           limit_s: float | None = None) -> Assessment:
    """Decide what to do with one live run whose owner is the runner ``owner`` (None when
    unrecorded or missing). ``now`` is Unix seconds; ``limit_s`` the run's ``time_limit``
    (None: unknown). Pure apart from process probes (psutil); never writes. See the module
    docstring for the policy."""
    if own_runner_id is not None and run.runner_id == own_runner_id:
        return Assessment(SweepAction.SKIP)
    if owner is not None:
        state = liveness.runner_liveness(owner, now=now, this_host=this_host)
        if state is RunnerLiveness.ALIVE:
            return Assessment(SweepAction.SKIP)
        if state is RunnerLiveness.STALLED:
            return Assessment(SweepAction.STALLED)
    if reattachable(run, owner, now=now, this_host=this_host) in ("running", "ended", "fanout"):
        # Its monitor holds the job (or how it ended), or it is a fan-out parent whose state is
        # all in the ledger: a runner of this host re-attaches it and records its true end.
        # Never killed, never orphaned.
        return Assessment(SweepAction.PENDING)
    if (owner is not None and owner.stopped_at is not None
            and owner.hostname != (this_host or liveness.hostname())):
        # A clean stop on another host left this run to its monitor there: only a runner of
        # that host can see how it goes, and re-attaches it when it starts (a reboot there
        # orphans it: same hostname, new life). A stop is an operator's act, not a death:
        # nothing here declares the run dead while it may still be running — at most a day,
        # and no longer than its own time limit and a lease: its monitor there ends the job
        # at its deadline, runner or not, and a run still counted live would hold its job's
        # next slots on every host (concurrency) for as long.
        trusted_until = owner.stopped_at + LEFT_ELSEWHERE_S
        if limit_s is not None and run.started_at is not None:
            trusted_until = min(trusted_until, max(owner.stopped_at, run.started_at + limit_s) + settings.lease)
        if trusted_until >= now:
            return Assessment(SweepAction.PENDING)
    start_missed = (run.state == State.SPAWNED and run.spawned_at is not None
                    and run.spawned_at + settings.start_timeout < now)
    if run.lease_until is not None:
        lease_expired = run.lease_until < now
    else:
        base = run.spawned_at or run.updated_at
        limit = settings.start_timeout if run.state == State.SPAWNED else settings.lease
        lease_expired = base + limit < now
    if not (settle_gone_now or lease_expired or start_missed):
        return Assessment(SweepAction.PENDING)
    # Pids are probed only within one host life: a run of another host (or of this host
    # before a reboot) is judged by its lease alone, whatever process holds its pid here.
    if owner is not None:
        same_host = liveness.same_life(owner.hostname, owner.boot_id, this_host=this_host)
    else:
        same_host = liveness.same_life(run.host, run.boot_id, this_host=this_host)
    # A runner that stopped cleanly listed this run as left behind: not a crash, never critical.
    interrupted = owner is not None and owner.stopped_at is not None
    if same_host and liveness.process_alive(run.pid, run.pid_create_time):
        return Assessment(SweepAction.KILL, EndReason.INTERRUPTED if interrupted else EndReason.RUNNER_GONE)
    if interrupted:
        return Assessment(SweepAction.ORPHAN, EndReason.INTERRUPTED, local=same_host)
    if start_missed:
        return Assessment(SweepAction.ORPHAN, EndReason.START_TIMEOUT, local=same_host)
    if lease_expired:
        return Assessment(SweepAction.ORPHAN, EndReason.LEASE_EXPIRED, local=same_host)
    return Assessment(SweepAction.ORPHAN, EndReason.RUNNER_GONE, local=same_host)


class Sweeper:
    """Finds and settles orphaned runs. One instance per sweeping loop (it remembers the
    time of its last pass to detect pauses).

    Args:
        settings: ``core.spec.settings.Settings`` (uses ``heartbeat``, ``lease``,
            ``sweep_interval``, ``start_timeout``).
        actor: recorded on every event (``runner:<id>`` or ``sweep``).
        own_runner_id: runs owned by this runner id are never touched (the runner watches
            its own children).
        kill_grace_cap: longest SIGTERM→SIGKILL wait, seconds (the job's ``grace`` applies
            when shorter).
        write_wait_s: how long one write waits on a locked ledger before giving up for this
            pass (default ``max(1, sweep_interval)`` seconds).
    """

    def __init__(self, settings: Any, *, actor: str, own_runner_id: str | None = None,
                 kill_grace_cap: float = DEFAULT_KILL_GRACE_CAP_S, write_wait_s: float | None = None,
                 this_host: str | None = None) -> None:
        self.settings = settings
        self.actor = actor
        self.own_runner_id = own_runner_id
        self.kill_grace_cap = kill_grace_cap
        self.write_wait_s = write_wait_s if write_wait_s is not None else max(1.0, settings.sweep_interval)
        self.this_host = this_host or liveness.hostname()
        self._last: tuple[float, float] | None = None  # (wall, monotonic) of the previous pass
        self._hold_until_mono = 0.0
        self._ledger_lost_at = 0.0  # monotonic: when a pass first could not read the ledger, 0 when it can

    def hold(self, seconds: float, why: str) -> None:
        """Declare nothing dead for ``seconds`` (monotonic) from now: this sweeper's view of the
        fleet was interrupted (``why``: the ledger out of reach), and the other runners must be
        given the time to heartbeat and renew their leases before anyone judges them by it."""
        until = time.monotonic() + seconds
        if until > self._hold_until_mono:
            self._hold_until_mono = until
            log.warning("%s; declaring no run dead for %.1fs, so that the other runners can heartbeat first",
                        why, seconds)

    # -- pause detection ----------------------------------------------------------------
    def _pause_gap(self, wall: float, mono: float) -> dict[str, float] | None:
        """The gaps since the last pass when they show a pause, else None."""
        if self._last is None:
            return None
        gap_wall, gap_mono = wall - self._last[0], mono - self._last[1]
        interval = self.settings.sweep_interval
        # A busy event loop or a slow kill may stretch a gap a little; a pause stretches it a lot.
        too_long = max(2 * interval, interval + 1.0)
        if max(gap_wall, gap_mono) > too_long or abs(gap_wall - gap_mono) > max(0.5, interval):
            return {"gap_wall_s": round(gap_wall, 3), "gap_monotonic_s": round(gap_mono, 3),
                    "sweep_interval_s": interval}
        return None

    def sweep_once(self, ledger: Ledger) -> SweepReport:
        """One periodic pass (with pause detection). Never raises for ledger or process
        errors: they are listed in ``SweepReport.errors`` and retried on the next pass."""
        wall, mono = time.time(), time.monotonic()
        gap = self._pause_gap(wall, mono)
        try:
            return self._pass(ledger, wall, mono, gap)
        finally:
            # Measured from the end of a pass, so a long pass (a slow kill) is not a pause.
            self._last = (time.time(), time.monotonic())

    def _pass(self, ledger: Ledger, wall: float, mono: float, gap: dict[str, float] | None) -> SweepReport:
        if gap is not None:
            self._hold_until_mono = mono + self.settings.heartbeat
            report = SweepReport(at=wall, skipped_paused=True)
            try:
                SqlStore(ledger).record_event(actor=self.actor, kind=AuditEvent.SWEEP_PAUSED, reason="pause_detected",
                                              detail=gap, max_wait_s=self.write_wait_s)
            except StorageError as exc:
                report.errors.append(f"sweep_paused event: {exc}")
            log.warning("sweep was paused (%s); declaring nothing dead for one heartbeat", gap)
            return report
        if mono < self._hold_until_mono:
            return SweepReport(at=wall, skipped_paused=True)
        return self.settle(ledger, now=wall, periodic=True)

    # -- one pass -----------------------------------------------------------------------
    def settle(self, ledger: Ledger, *, settle_gone_now: bool = False, now: float | None = None,
               periodic: bool = False) -> SweepReport:
        """One pass without pause detection. ``settle_gone_now`` skips the lease wait for
        runs of gone runners (startup reconciliation). ``now`` is Unix seconds. ``periodic``
        (the sweep loop's passes): a read that failed, or answered late, holds this sweeper's
        judgement (``hold``) for a lease plus that long. Never raises for ledger or process
        errors (see ``SweepReport.errors``)."""
        now = time.time() if now is None else now
        report = SweepReport(at=now)
        began = time.monotonic()
        try:
            live = SqlStore(ledger).live_runs_and_owners()
        except StorageError as exc:
            report.errors.append(f"read: {exc}")
            if periodic:
                self._ledger_lost_at = self._ledger_lost_at or began
            return report
        out = time.monotonic() - (self._ledger_lost_at or began)
        if periodic and (self._ledger_lost_at or out > max(1.0, self.settings.heartbeat)):
            # Back after the ledger was out of reach (or answered only that late: a server
            # restart, a connection pool backing off): every runner's heartbeat and leases went
            # stale in that time, not only the dead ones', and the others may need as long
            # again to get through, so none is judged by them for a lease plus that long.
            self._ledger_lost_at = 0.0
            self.hold(self.settings.lease + out, f"the ledger answered this sweeper only after {out:.1f}s")
            report.skipped_paused = True
            return report
        if periodic and time.monotonic() < self._hold_until_mono:
            report.skipped_paused = True
            return report
        stalled: set[str] = set()
        specs: dict[str, JobSpec | None] = {}
        for run, owner in live:
            limit = None
            if owner is not None and owner.stopped_at is not None and owner.hostname != self.this_host:
                # Read only for runs a clean stop left on another host (rare), once per job.
                if run.job not in specs:
                    specs[run.job] = _spec_of(ledger, run.job)
                limit = time_limit(specs[run.job], run)
            assessment = assess(run, owner, now=now, settings=self.settings, this_host=self.this_host,
                                own_runner_id=self.own_runner_id, settle_gone_now=settle_gone_now, limit_s=limit)
            if assessment.action == SweepAction.STALLED and run.runner_id is not None:
                stalled.add(run.runner_id)
            elif assessment.action == SweepAction.PENDING:
                report.pending.append(run.id)
            elif assessment.action in (SweepAction.ORPHAN, SweepAction.KILL):
                self._settle_run(ledger, run, assessment, report)
        self._settle_stranded_subtasks(ledger, report)
        report.stalled_runners = sorted(stalled)
        if stalled:
            log.warning("runner(s) %s stalled: process alive, heartbeat stale; their runs are left alone",
                        ", ".join(report.stalled_runners))
        return report

    def settle_lost(self, ledger: Ledger, run_ids: set[int], *, runner_id: str,
                    reason: EndReason = EndReason.RUNNER_ERROR) -> LostReport:
        """Settle runs a live runner (``runner_id``) stopped watching because their task died
        of an error in the runner: the sweep never touches a live runner's runs, so the runner
        hands them over here. A still-alive process group is killed first; then the run is
        ``orphaned`` with ``reason`` (an attempt, retried per policy). Never raises for ledger
        or process errors: such a run is left out of ``finished`` and tried again next call."""
        out = LostReport()
        store = SqlStore(ledger)
        for run_id in sorted(run_ids):
            try:
                run = store.run(run_id)
            except StorageError as exc:
                log.warning("run %s: cannot read it to settle it, retried next call: %s", run_id, exc)
                continue
            if run is None or run.state not in LIVE or run.runner_id != runner_id:
                out.finished.append(run_id)
                continue
            alive = bool(run.pid) and liveness.process_alive(run.pid, run.pid_create_time)
            report = SweepReport(at=time.time())
            self._settle_run(ledger, run, Assessment(SweepAction.KILL if alive else SweepAction.ORPHAN, reason), report)
            if run_id in report.orphaned:
                out.orphaned.append(run_id)
                out.finished.append(run_id)
            elif not report.errors:
                out.finished.append(run_id)  # someone else moved it first
        return out

    def _settle_run(self, ledger: Ledger, run: Run, assessment: Assessment, report: SweepReport) -> None:
        detail: dict[str, Any] = {"pid": run.pid, "runner_id": run.runner_id, "lease_until": run.lease_until}
        fields: dict[str, Any] = {}
        leader_dead = assessment.action == SweepAction.ORPHAN and assessment.local
        if assessment.action == SweepAction.KILL:
            pgid: int | None = None
            try:
                if run.pid is None:
                    raise ProcessLookupError(run.id)
                pgid = os.getpgid(run.pid)
                sig = stop_group(pgid, grace=min(self._job_grace(ledger, run.job), self.kill_grace_cap))
            except ProcessLookupError:
                sig = None  # died on its own between the probe and the kill
                pgid = run.pgid
                leader_dead = True
            except PermissionError as exc:
                report.errors.append(f"run {run.id}: cannot kill process group: {exc}")
                return
            detail.update(killed=True, pgid=pgid, kill_signal=sig)
            if sig is not None:
                fields["signal"] = int(sig)
                report.killed.append(run.id)
        findings: list[dict[str, str]] = []
        if leader_dead and run.pgid:
            findings = self._kill_leftovers(ledger, run, detail, report)
        # The terminal recipe: outcome, a fan-out parent's queued sub-tasks, the retry decision.
        extra: dict[str, Any] = {"handoff_findings": findings} if findings else {}
        code = assessment.reason or EndReason.RUNNER_GONE  # ORPHAN and KILL always carry one
        try:
            won = SqlStore(ledger, retry=RETRY).finish_run(run.id, run.attempt, run.state, State.ORPHANED, actor=self.actor,
                                              reason_code=code, reason=code.value,
                                              fields=fields, detail=detail,
                                              outcome={"signal": fields.get("signal"), **extra},
                                              max_wait_s=self.write_wait_s)
        except StorageError as exc:
            report.errors.append(f"run {run.id}: orphan write failed, retried next pass: {exc}")
            return
        if not won:
            return  # someone else moved it first (the owner, an operator, another sweep)
        report.orphaned.append(run.id)
        name = f"{run.job}/{run.task}" if run.task else run.job
        log.warning("run %s (%s attempt %s) orphaned: %s", run.id, name, run.attempt, assessment.reason)
        try:
            supervisor.judge_run(ledger, run.id, settings=self.settings)
        except Exception as exc:  # the terminal move stands; judging is the supervisor's to retry
            log.exception("judge_run failed for run %s", run.id)
            report.errors.append(f"run {run.id}: judge_run failed: {exc}")

    def _kill_leftovers(self, ledger: Ledger, run: Run, detail: dict[str, Any],
                        report: SweepReport) -> list[dict[str, str]]:
        """The leader is dead: kill what the run started that is still in its recorded
        process group (pgid AND ``WATCHKEEPER_RUN_ID`` must both match, so a reused pid is
        never touched). Adds them to ``detail``; returns the outcome finding (or none)."""
        procs = liveness.run_group_leftovers(run.pgid, run.id)
        if not procs:
            return []
        found = [describe(p) for p in procs]
        sig = stop_processes(procs, grace=min(self._job_grace(ledger, run.job), self.kill_grace_cap))
        detail.update(pgid=run.pgid, leftovers=found, leftover_signal=sig)
        if sig is None:
            return []  # all ended on their own between the scan and the kill
        report.leftovers_killed.append(run.id)
        log.warning("run %s: killed %d process(es) left in its process group %s after its leader died: %s",
                    run.id, len(found), run.pgid, ", ".join(str(f["pid"]) for f in found))
        return [{"code": "leftover_processes", "message": (
            f"killed ({signal_name(sig)}) after the leader died, still in the run's process group"
            f" {run.pgid}: " + ", ".join(f"pid {f['pid']} ({f['cmd']})" for f in found[:10]))}]

    def _settle_stranded_subtasks(self, ledger: Ledger, report: SweepReport) -> None:
        """Abandon queued fan-out sub-tasks whose parent run already ended (a parent ended by
        a path that did not settle them, e.g. an operator's abandon, or an older ledger)."""
        store = SqlStore(ledger)
        try:
            parents = store.stranded_parent_runs()
        except StorageError as exc:
            report.errors.append(f"read sub-tasks: {exc}")
            return
        for parent_id in parents:
            try:
                done = store.abandon_queued_subtasks(parent_id, actor=self.actor, max_wait_s=self.write_wait_s)
            except StorageError as exc:
                report.errors.append(f"run {parent_id}: settling its queued sub-tasks failed, retried next pass: {exc}")
                continue
            if done:
                log.warning("run %s ended: abandoned its queued sub-task run(s) %s", parent_id, done)
            report.settled_subtasks.extend(done)

    @staticmethod
    def _job_grace(ledger: Ledger, job: str) -> float:
        got = SqlStore(ledger).job(job)
        try:
            return float(json.loads(got.spec).get("grace", 5.0)) if got else 5.0
        except (ValueError, TypeError, AttributeError):
            return 5.0


def reconcile_startup(ledger: Ledger, settings: Any, *, runner_id: str) -> list[int]:
    """At runner start: settle at once (no lease wait) the live runs of gone runners.

    Runs of alive or stalled runners, and of ``runner_id`` itself, are left alone. Returns
    the run ids moved to ``orphaned`` (table ``runs``; each with its outcome, retry decision
    and audit events). Ledger errors are logged and leave the runs for the periodic sweep.
    """
    report = Sweeper(settings, actor=f"runner:{runner_id}", own_runner_id=runner_id).settle(
        ledger, settle_gone_now=True)
    for err in report.errors:
        log.warning("startup reconciliation: %s", err)
    return report.orphaned


def loop(ledger: Ledger, settings: Any, *, actor: str = "sweep", interval: float | None = None,
         stop: threading.Event | None = None, max_passes: int | None = None,
         on_report: Callable[[SweepReport], None] | None = None) -> int:
    """Sweep every ``interval`` seconds (default ``settings.sweep_interval``) until ``stop``
    is set or ``max_passes`` passes ran. Returns the number of passes. ``on_report`` gets
    each ``SweepReport``."""
    interval = settings.sweep_interval if interval is None else interval
    # Pause detection measures gaps against the interval actually slept.
    sweeper = Sweeper(settings.model_copy(update={"sweep_interval": interval}), actor=actor)
    stop = stop or threading.Event()
    passes = 0
    while not stop.is_set():
        report = sweeper.sweep_once(ledger)
        passes += 1
        if on_report is not None:
            on_report(report)
        if max_passes is not None and passes >= max_passes:
            break
        stop.wait(interval)
    return passes
