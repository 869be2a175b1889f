"""``watchkeeper prune``: retention — delete old runs with their rows and artifact folders."""

from __future__ import annotations

import json
from typing import Any

import click
import humanize

from console.cli.common import (
    DURATION,
    EXIT_CONFIG,
    EXIT_FINDINGS,
    config_option,
    fail,
    ledger_errors,
    ledger_option,
    open_ledger_at,
    open_settings,
    shown,
)
from core.ledger import retention
from core.text import quoted, short_age


class _Size(click.ParamType):
    """A size such as ``500MB``, ``2GiB`` or bytes (pydantic's ByteSize rules)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from pydantic import ByteSize, TypeAdapter, ValidationError
        try:
            size = int(TypeAdapter(ByteSize).validate_python(value))
        except ValidationError:
            self.fail(f"{quoted(value)}: not a size (e.g. 500MB, 2GiB, 1048576)", param, ctx)
        if size <= 0:
            self.fail(f"{quoted(value)}: must be more than 0 bytes", param, ctx)
        return size


def _size(n: int) -> str:
    return humanize.naturalsize(n, binary=True)


def explain(rep: retention.PruneReport) -> list[str]:
    """Why runs past the limits stay, and whether ``max_size`` is met: sentences for people,
    one per line (empty when there is nothing to explain)."""
    lines = []
    limits = ", or ".join(
        ([f"ended more than {short_age(rep.max_age)} ago"] if rep.max_age is not None else [])
        + ([f"beyond max_size {_size(rep.max_size)}"] if rep.max_size is not None else []))
    if rep.due == 0 and rep.runs == 0:
        within = ([f"no run ended more than {short_age(rep.max_age)} ago"] if rep.max_age is not None else []) + (
            [f"ledger and artifacts ({_size(rep.size_before)}) are within max_size {_size(rep.max_size)}"]
            if rep.max_size is not None and rep.size_before <= rep.max_size else [])
        if within:
            lines.append("nothing is past retention: " + " and ".join(within))
    kept = [(rep.kept_recent, f"among their job's newest keep_per_job={rep.keep_per_job}"),
            (rep.kept_cited, "cited by an open escalation"),
            (rep.kept_lineage, "a retry or first attempt of a run that stays (a lineage goes whole)"),
            (rep.kept_unfinished, "not ended yet, or a sub-task of theirs has not"),
            (rep.kept_mission, "workers of a mission still open"),
            (rep.kept_pinned, "holding the highest id (so no number shown is given out again)")]
    reasons = [f"{n} {why}" for n, why in kept if n]
    if reasons:
        lines.append(f"kept {sum(n for n, _ in kept)} run(s) past retention ({limits}): " + "; ".join(reasons))
    if rep.max_size is not None and rep.size_after > rep.max_size:
        about = "about " if rep.dry_run else ""
        lines.append(f"max_size {_size(rep.max_size)} cannot be met: ledger and artifacts "
                     f"{'would be' if rep.dry_run else 'are'} {about}{_size(rep.size_after)}, "
                     f"{about}{_size(rep.size_after - rep.max_size)} over")
    return lines


def _print(rep: retention.PruneReport) -> None:
    verb = "would remove" if rep.dry_run else "removed"
    click.echo(f"{verb} {rep.runs} run(s) (+{rep.subtasks} sub-task runs), {rep.outcomes} outcomes, "
               f"{rep.events} events, {rep.escalations} resolved escalations, {rep.notifications} notifications, "
               f"{rep.artifact_dirs} artifact folders")
    for line in explain(rep):
        click.echo(line)
    if rep.artifacts_missing:
        named = ", ".join(shown(n) for n in rep.artifacts_missing_names)
        more = f" (and {rep.artifacts_missing - len(rep.artifacts_missing_names)} more)" \
            if rep.artifacts_missing > len(rep.artifacts_missing_names) else ""
        click.echo(f"{rep.artifacts_missing} artifact folder(s) not found: {named}{more}")
    if not rep.dry_run:
        click.echo(f"size {_size(rep.size_before)} → {_size(rep.size_after)} in {rep.batches} batch(es), "
                   f"longest write {rep.max_tx_s * 1000:.0f} ms")
    for err in rep.artifact_errors[:20]:
        click.echo(f"error: {shown(err)}", err=True)


@click.command("prune")
@click.argument("spec_dir", required=False, type=click.Path(exists=True, file_okay=False))
@ledger_option
@config_option
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@click.option("--max-age", type=DURATION, default=None, help="Override retention.max_age (e.g. 30d).")
@click.option("--max-size", type=_Size(), default=None, help="Override retention.max_size (e.g. 2GB).")
@click.option("--keep-per-job", type=click.IntRange(0, 1_000_000), default=None,
              help="Override retention.keep_per_job (newest ended runs kept per job).")
@click.option("--vacuum-full", is_flag=True,
              help="Once, for a ledger made before retention: rebuild it so pruned space is given back "
                   "(blocks the runner while it runs).")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON document.")
@ledger_errors
def prune_cmd(spec_dir: str | None, ledger_path: str | None, config_path: str | None, dry_run: bool,
              max_age: float | None, max_size: int | None, keep_per_job: int | None, vacuum_full: bool,
              as_json: bool) -> None:
    """Delete runs past retention, with their outcomes, events, notifications and artifact folders.

    Limits come from the `retention` settings (watchkeeper.toml in SPEC_DIR or --config;
    on by default: max_age 90d, keep_per_job 60; `enabled = false` turns it off) or the
    flags, which apply even when it is off. Never removed: a run an open escalation cites, a run still going, and the
    newest keep_per_job ended runs of each job (the history its baselines are learnt from); a
    run and its retries go or stay together. Every run kept past the limits is counted with
    its reason, and artifact folders not found are counted and named. Deletes go in short batches (a runner keeps running meanwhile), then the freed space is
    given back to the file system. Exit 1 when artifact folders could not be removed.

    \b
    Example:
      watchkeeper prune --ledger demo/watchkeeper.db --max-age 30d --dry-run
      watchkeeper prune sample_jobs                     # limits from sample_jobs/watchkeeper.toml
    """
    settings = open_settings(spec_dir, config_path, ledger=ledger_path)
    ret = settings.retention
    # Switched off, the settings' limits do not apply; limits given as flags still do.
    age = max_age if max_age is not None else (ret.max_age if ret.enabled else None)
    size = max_size if max_size is not None else (
        int(ret.max_size) if ret.max_size is not None and ret.enabled else None)
    keep = keep_per_job if keep_per_job is not None else ret.keep_per_job
    if age is None and size is None:
        fail("retention is off (retention.enabled = false in watchkeeper.toml): nothing to prune; "
             "pass --max-age / --max-size to prune anyway" if not ret.enabled else
             "no retention limit: set retention.max_age or retention.max_size in watchkeeper.toml, "
             "or pass --max-age / --max-size", EXIT_CONFIG)
    led = open_ledger_at(settings.ledger)
    try:
        if vacuum_full and not dry_run:
            retention.vacuum_full(led)
        rep = retention.prune(led, max_age=age, max_size=size, keep_per_job=keep,
                              artifacts_dir=settings.artifacts_dir, batch=ret.batch, dry_run=dry_run,
                              actor=f"operator:{settings.operator}")
    finally:
        led.close()
    if as_json:
        click.echo(json.dumps(rep.to_dict()))
    else:
        _print(rep)
    if rep.artifact_errors:
        raise SystemExit(EXIT_FINDINGS)


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (prune_cmd,)
