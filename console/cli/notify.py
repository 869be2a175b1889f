"""``watchkeeper notify test``: send a test notification through the configured sinks and say,
per sink, whether it was delivered — so an operator checks an e-mail or chat setup before a
real failure needs it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from console.cli.common import EXIT_FINDINGS, EXIT_NOT_FOUND, fail, open_settings, shown
from core.spec.settings import CONFIG_NAME
from core.supervisor import notify as core_notify


@click.group("notify")
def notify_group() -> None:
    """Notification sinks: check that they deliver.

    \b
    Example:
      watchkeeper notify test sample_jobs --sink ops-mail
    """


@notify_group.command("test")
@click.argument("spec_dir", required=False, default=".", type=click.Path(file_okay=False))
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help=f"Settings file [default: DIR/{CONFIG_NAME}].")
@click.option("--sink", "sink_names", multiple=True, metavar="NAME",
              help="Only this sink (repeatable) [default: every configured sink].")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: a result per sink.")
def notify_test_cmd(spec_dir: str, config_path: str | None, sink_names: tuple[str, ...], as_json: bool) -> None:
    """Send a test notification through each configured sink and report delivery.

    The sinks come from DIR/watchkeeper.toml (DIR defaults to the current folder) or
    --config. Every sink gets the message, whatever its min_severity and owners; nothing is
    written to the ledger. Each sink is tried once with its own timeout (no retries).
    Exit status: 0 every sink delivered, 1 at least one failed, 2 no sink (or no sink of
    that name), 3 bad settings.

    \b
    Example:
      watchkeeper notify test sample_jobs
      watchkeeper notify test --config /etc/watchkeeper/watchkeeper.toml --sink ops-mail
    """
    settings = open_settings(spec_dir, config_path)
    where = config_path or str(Path(spec_dir) / CONFIG_NAME)
    sinks = list(settings.notify)
    if not sinks:
        fail(f"no notification sinks configured in {shown(where)} (add a [[notify]] table)", EXIT_NOT_FOUND)
    if sink_names:
        known = [s.name for s in sinks]
        unknown = [n for n in sink_names if n not in known]
        if unknown:
            fail(f"no sink named {shown(unknown[0])!r} in {shown(where)} (sinks: {', '.join(map(shown, known))})",
                 EXIT_NOT_FOUND)
        sinks = [s for s in sinks if s.name in sink_names]
    results = []
    for sink in sinks:
        payload = core_notify.test_payload(sink.name, operator=settings.operator)
        started = time.monotonic()
        error: str | None = None
        try:
            core_notify.send(sink, json.dumps(payload), sink.timeout)
        except RuntimeError as exc:
            error = str(exc)
        took = time.monotonic() - started
        results.append({"sink": sink.name, "type": sink.type, "delivered": error is None, "error": error,
                        "seconds": round(took, 3)})
        if not as_json:
            said = f"delivered in {took:.1f}s" if error is None else f"FAILED after {took:.1f}s: {shown(error)}"
            click.echo(f"{shown(sink.name)} ({sink.type}): {said}")
    failed = sum(1 for res in results if res["error"] is not None)
    if as_json:
        click.echo(json.dumps({"ok": failed == 0, "results": results}))
    else:
        click.echo(f"{len(results) - failed} of {len(results)} sink(s) delivered", err=True)
    if failed:
        raise SystemExit(EXIT_FINDINGS)


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (notify_group,)
