"""The four main views: escalations (triage queue), outcomes, live & orphaned runs, jobs."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from rich.text import Text

from console.safe_text import escaped, escaped_line
from console.widgets.cells import (
    age,
    cell,
    clock,
    duration,
    exit_text,
    job_name,
    kind_label,
    run_state,
    word,
)
from console.widgets.paged_table import Column, PagedTable
from console.widgets.sparkline import run_bars
from core.ledger import reads
from core.ledger.page_records import InvalidSpec, JobRow, LiveRunRow, OutcomeRow
from core.ledger.records import Escalation
from core.ledger.sql_store import SqlStore
from core.supervisor.policy.words import next_run_word


def _short_owner(owner: str | None) -> str:
    """An owner as the table shows it: the name part of an e-mail address (the preview line
    and the escalation detail give it whole)."""
    if not owner:
        return "-"
    return owner.split("@", 1)[0] if "@" in owner[1:] else owner


class EscalationsTable(PagedTable[Escalation]):
    """Open escalations first, then by severity; acknowledged/snoozed/resolved below.

    Age is how long it has been a problem (since first seen); Last (since last seen) shows
    from 100 columns, and always in the preview line with the full kind and the reason."""

    VIEW = "escalations"
    TITLE = "Escalations"
    EMPTY = "No escalations — the supervisor raises one when a run needs a person."
    COLUMNS = (
        Column("severity", "Sev", 6),
        Column("job", "Job", 10, 1),
        Column("kind", "Kind", 9, 1),
        Column("count", "×", 3),
        Column("age", "Age", 7),
        Column("last", "Last", 7, 0, 100),
        Column("owner", "Owner", 5, 1),
        Column("state", "State", 10),
        Column("why", "Why", 10, 6, 110),
    )
    FETCH = staticmethod(lambda ledger, *, now, offset, limit, flt:
                         SqlStore(ledger).escalations_page(offset=offset, limit=limit, flt=flt))

    def key_of(self, row: Escalation) -> str:
        return str(row.id)

    def cells(self, row: Escalation) -> list[Text]:
        label = word("escalation_state", row.state)
        if row.state == "snoozed" and row.snoozed_until:
            label = cell(f"z {age(row.snoozed_until - self.now, 1)}", "dim")
        return [word("severity", row.severity), cell(row.job), cell(kind_label(row.kind)),
                cell(row.count), cell(age(self.now - (row.first_seen or row.last_seen))),
                cell(age(self.now - row.last_seen)), cell(_short_owner(row.owner)), label,
                cell(row.reason or "")]

    def run_id_of(self, row: Escalation) -> int | None:
        return row.latest_run_id

    def job_of(self, row: Escalation) -> str | None:
        return row.job

    def preview(self, row: Escalation) -> Text | None:
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        out.append(escaped(row.kind, keep_newlines=False), style="bold")
        out.append(": " + escaped(row.reason or "(no reason recorded)", keep_newlines=False))
        return out

    def meta(self, row: Escalation) -> str:
        return f"last {age(self.now - row.last_seen)} ago, ×{row.count}, owner {escaped_line(row.owner or '-', 20)}"


class OutcomesTable(PagedTable[OutcomeRow]):
    """Finished runs, newest first."""

    VIEW = "outcomes"
    TITLE = "Outcomes"
    EMPTY = "No finished runs yet — outcomes appear here as runs end."
    COLUMNS = (
        Column("time", "Time", 8),
        Column("job", "Job", 10, 2),
        Column("attempt", "#", 2),
        Column("state", "State", 9),
        Column("duration", "Took", 6),
        Column("exit", "Exit", 7),  # SIGKILL
        Column("host", "Host", 4, 1, fleet=True),
        Column("reason", "Reason", 8, 4),
    )
    FETCH = staticmethod(lambda ledger, *, now, offset, limit, flt:
                         SqlStore(ledger).outcomes_page(offset=offset, limit=limit, flt=flt))

    def key_of(self, row: OutcomeRow) -> str:
        return str(row.id)

    def run_id_of(self, row: OutcomeRow) -> int | None:
        return row.id

    def job_of(self, row: OutcomeRow) -> str | None:
        return row.job

    def cells(self, row: OutcomeRow) -> list[Text]:
        reason = row.reason
        if row.silent == 1 and not reason:  # the manual's words for a routine success, else plain silence
            reason = "routine success" if row.verdict_kind == "routine" else "(silent)"
        if reason == row.run_reason and reason in ("exit_code", "signal", row.state):
            reason = ""  # it would only repeat the State and Exit columns
        return [cell(clock(row.ended_at, self.now)), cell(job_name(row.job, row.task)), cell(row.attempt),
                run_state(row.state, row.status), cell(duration(row.duration_s)),
                cell(exit_text(row.exit_code, row.signal)), cell(row.host or "-"), cell(reason)]

    def preview(self, row: OutcomeRow) -> Text | None:
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        if row.verdict_kind:
            out.append(escaped(row.verdict_kind, keep_newlines=False) + ": ", style="bold")
        out.append(escaped(row.reason or "(no reason)", keep_newlines=False))
        return out

    def meta(self, row: OutcomeRow) -> str:
        where = f" on {escaped_line(row.host, 30)}" if row.host else ""
        return f"run {row.id}{where}, ended {clock(row.ended_at, self.now)}"


class OrphansTable(PagedTable[LiveRunRow]):
    """Live & orphans: every live run (spawned, running, verifying), those at risk first
    (lease expired, runner stopped, silent or gone), then orphaned runs. ``x`` abandons the
    cursor's run, a healthy running one included (it kills its process group)."""

    VIEW = "orphans"
    TITLE = "Live & orphans"
    EMPTY = "No orphaned or at-risk runs, none running — the sweep checks every few s."
    COLUMNS = (
        Column("job", "Job", 10, 2),
        Column("attempt", "#", 2),
        Column("state", "State", 10),
        Column("lease", "Lease", 6),
        Column("pid", "Pid", 7),
        Column("host", "Host", 4, 1, fleet=True),
        Column("runner", "Runner", 6, 1),
        Column("heartbeat", "Beat", 5),
        Column("reason", "Reason", 6, 2),
    )
    FETCH = staticmethod(lambda ledger, *, now, offset, limit, flt:
                         SqlStore(ledger).orphans_page(now=now, offset=offset, limit=limit, flt=flt))

    def key_of(self, row: LiveRunRow) -> str:
        return str(row.id)

    def run_id_of(self, row: LiveRunRow) -> int | None:
        return row.id

    def job_of(self, row: LiveRunRow) -> str | None:
        return row.job

    def cells(self, row: LiveRunRow) -> list[Text]:
        lease = row.lease_age_s
        lease_txt = "-" if lease is None else (f"+{age(lease, 1)}" if lease > 0 else f"ok {age(-lease, 1)}")
        state = word("run_state", row.state)
        if row.at_risk:
            state = cell(f"! {row.state}", "bold yellow")
        return [cell(job_name(row.job, row.task)), cell(row.attempt), state, cell(lease_txt), cell(row.pid or "-"),
                cell(row.host or "-"), cell(row.runner_id or "-"), cell(age(row.heartbeat_age_s, 1)),
                cell(row.reason or row.risk or "")]

    def preview(self, row: LiveRunRow) -> Text | None:
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        out.append(f"run {row.id} ", style="bold")
        if row.at_risk:
            out.append(escaped(f"at risk: {row.risk or 'lease expired or runner silent'}", keep_newlines=False))
        elif row.live:
            out.append(escaped(f"{row.state} since {clock(row.started_at, self.now)}, pid {row.pid or '-'}"
                             f" on {row.host or '-'} (runner {row.runner_id or '-'})", keep_newlines=False))
            out.append("  (x: abandon, kills it)", style="dim")
        else:
            out.append(escaped(row.reason or "-", keep_newlines=False))
        return out


#: Spec files listed at most in the Jobs view (they are read whole on every poll of the view).
INVALID_SHOWN = 200


def _invalid_rows(ledger: Any, flt: reads.Filter | None) -> list[InvalidSpec]:
    """Spec files whose job never loaded (``core.ledger.reads.invalid_specs``), listed in the
    Jobs view above the jobs, under the same filter as the jobs: ``job:`` and free text match
    the job name, file and message; a ``state:``/``kind:`` filter leaves them out."""
    specs = SqlStore(ledger).invalid_specs(never_loaded=True, limit=INVALID_SHOWN)
    if flt is not None and (flt.state or flt.kind):
        return []
    out = []
    for spec in specs:
        hay = f"{spec.name} {spec.source} {spec.text}".lower()
        if flt is not None and flt.job and flt.job.lower() not in spec.name.lower():
            continue
        if flt is not None and flt.text and flt.text.lower() not in hay:
            continue
        out.append(spec)
    return out


class JobsTable(PagedTable[JobRow | InvalidSpec]):
    """Jobs by name: schedule, next run, last outcome, success rate, breaker; spec files that
    never loaded (``InvalidSpec`` rows) above them."""

    VIEW = "jobs"
    TITLE = "Jobs"
    EMPTY = "No jobs loaded — put job files in the runner's jobs folder."
    COLUMNS = (
        Column("name", "Job", 10, 2),
        Column("schedule", "Schedule", 10, 2),
        Column("next", "Next", 6),
        Column("last", "Last", 9),
        Column("rate", "OK%", 4),
        Column("recent", "Recent", 10),
        Column("breaker", "Breaker", 7),
    )
    FETCH = staticmethod(lambda ledger, *, now, offset, limit, flt:
                         SqlStore(ledger).jobs_page(now=now, offset=offset, limit=limit, flt=flt))

    def fetch(self, ledger: Any, *, now: float, offset: int, limit: int,
              flt: reads.Filter | None) -> reads.Page[JobRow | InvalidSpec]:
        """Spec files that never loaded first (so a job whose file does not parse is not
        invisible), then the jobs by name."""
        bad: list[JobRow | InvalidSpec] = list(_invalid_rows(ledger, flt))
        head = bad[offset:offset + limit]
        rest = limit - len(head)
        if rest <= 0:
            return reads.Page(head, None)
        page = SqlStore(ledger).jobs_page(now=now, offset=max(0, offset - len(bad)), limit=rest, flt=flt)
        return reads.Page([*head, *page.rows], page.cursor)

    def count(self, ledger: Any, *, now: float, flt: reads.Filter | None) -> int:
        return len(_invalid_rows(ledger, flt)) + super().count(ledger, now=now, flt=flt)

    def key_of(self, row: JobRow | InvalidSpec) -> str:
        if isinstance(row, InvalidSpec):
            return "invalid:" + row.key
        return "job:" + row.name

    def job_of(self, row: JobRow | InvalidSpec) -> str | None:
        return row.name if isinstance(row, JobRow) else None

    def cells(self, row: JobRow | InvalidSpec) -> list[Text]:
        if isinstance(row, InvalidSpec):
            where = f"{PurePath(row.source).name}:{row.line}" if row.line else PurePath(row.source).name
            return [Text("! ", style="bold red") + cell(row.name), cell("spec invalid", "bold red"),
                    cell("-"), cell(where), cell("-"), cell("-"), cell("-")]
        next_txt = next_run_word(row.next_run, row.next_held, self.now)  # as the CLI's `jobs`
        rate = row.success_rate
        rate_txt = "-" if rate is None else f"{rate * 100:.0f}"
        sched = row.schedule_text or "manual"
        if not row.enabled:
            sched = "(off) " + sched
        name = cell(row.name)
        if row.last_error:
            name = Text("! ", style="bold red") + name  # its last edit is invalid; the kept spec runs
        elif row.paused_at:
            name = Text("‖ ", style="bold yellow") + name  # paused: scheduled slots are skipped
        return [name, cell(sched), cell(next_txt), run_state(row.last_state, row.last_status),
                cell(rate_txt), run_bars([(x.state, x.status, x.duration_s) for x in row.recent_runs], 10), word("breaker", row.breaker_state)]

    def preview(self, row: JobRow | InvalidSpec) -> Text | None:
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        if isinstance(row, InvalidSpec):
            out.append("spec error, never loaded: ", style="bold red")
            out.append(escaped(row.text, keep_newlines=False))
            return out
        out.append(escaped(row.name, keep_newlines=False), style="bold")
        if row.last_error:
            out.append("  spec error (last good spec still runs): ", style="bold red")
            out.append(escaped(row.last_error, keep_newlines=False))
            return out
        if row.paused_at:
            who = str(row.paused_by or "-").removeprefix("operator:")
            out.append(escaped(f"  paused by {who} {age(self.now - row.paused_at, 1)} ago", keep_newlines=False),
                       style="bold yellow")
            if row.pause_reason:
                out.append(escaped(f" ({row.pause_reason})", keep_newlines=False))
        out.append(escaped(f"  owner {row.owner or '-'} · {row.intent or ''}", keep_newlines=False))
        return out

    def meta(self, row: JobRow | InvalidSpec) -> str:
        if isinstance(row, InvalidSpec):
            return f"fix {escaped_line(row.source, 60)}; the runner loads it when it parses"
        return "enter: its outcomes · h: history · P: pause/resume · t: run now"


VIEWS: tuple[type[PagedTable[Any]], ...] = (EscalationsTable, OutcomesTable, OrphansTable, JobsTable)
