"""Cron adoption: read a crontab (python-crontab) into job specs, or rewrite it so each line
runs under ``watchkeeper exec``.

What carries over: the schedule (``@daily`` and friends become five-field expressions),
the command (run through ``$SHELL -c`` as cron does, ``\\%`` unescaped), environment lines
above a job (``NAME=value``; ``CRON_TZ``/``TZ`` → ``timezone``; ``MAILTO`` → ``owner``), and
the comment block right above a job or on its line → ``intent``.

What cannot (each named with its line number, never dropped silently): ``@reboot`` (no
schedule: a systemd unit's job), an unescaped ``%`` (cron feeds the rest to stdin), a
schedule cronsim or the job spec refuses, and a line that is neither a job, an environment
line nor a comment.
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from crontab import CronTab
from pydantic import ValidationError

from core.spec.model import NAME_RE, JobSpec

SPECIALS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
            "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_ENV_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_UNESCAPED_PCT = re.compile(r"(?<!\\)%")


@dataclass
class CronJob:
    """One crontab line taken: its 1-based ``line``, the original text, the spec fields
    (``name``, ``schedule``, ``command``, ``env``, ``timezone``, ``owner``, ``intent``) and
    the schedule and command as cron sees them (for the rewrite)."""

    line: int
    text: str
    fields: dict[str, Any]
    cron_schedule: str
    cron_command: str

    @property
    def name(self) -> str:
        return str(self.fields["name"])


@dataclass
class Refused:
    """A line that could not be taken, with why (shown as ``LINE: reason``)."""

    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.text.strip()[:120]}"


@dataclass
class CrontabImport:
    """The result of ``parse``: jobs taken and lines refused, in file order, and every line
    (for the rewrite)."""

    jobs: list[CronJob] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _slug(command: str) -> str:
    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        first = command.split()[0] if command.split() else "job"
    base = PurePosixPath(first).name.split(".")[0]
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-.") or "job"
    return base[:60] if NAME_RE.match(base[:60]) else "job"


#: A byte that was not UTF-8, as ``open(..., errors="surrogateescape")`` reads it.
_SURROGATE = re.compile("[\udc80-\udcff]")


def parse(text: str, *, prefix: str = "") -> CrontabImport:
    """Read crontab ``text`` line by line (python-crontab parses each job line).

    Job names come from the command's program name (``backup.sh`` → ``backup``), with
    ``prefix`` before and ``-2``, ``-3`` after repeats. ``text`` read with
    ``errors="surrogateescape"``: a line with bytes that are not UTF-8 is refused (and a
    comment with them gives no intent), so ``rewrite`` leaves it byte for byte. Returns a ``CrontabImport``; it never
    raises on bad lines (they are ``refused``).
    """
    out = CrontabImport(lines=text.splitlines())
    env: dict[str, str] = {}
    comments: list[str] = []
    taken: dict[str, int] = {}
    for no, raw in enumerate(out.lines, 1):
        line = raw.strip()
        if not line:
            comments = []
            continue
        if _SURROGATE.search(line):
            # Bytes that are not UTF-8 (read with surrogateescape): rewritten or put in a
            # spec they would change, so the line stays in cron exactly as it is.
            if not line.startswith("#"):
                out.refused.append(Refused(no, raw, "not valid UTF-8 (left as it is: fix the bytes to import it)"))
            comments = []
            continue
        if line.startswith("#"):
            comments.append(line.lstrip("#").strip())
            continue
        m = _ENV_RE.match(line)
        if m and not line.startswith("@") and not line[0].isdigit() and not line.startswith("*"):
            env[m.group(1)] = _unquote(m.group(2))
            continue
        intent_lines = [c for c in comments if c]
        comments = []
        item, problem = _read_item(line)
        if item is None:
            out.refused.append(Refused(no, raw, f"not a cron job line ({problem or 'unreadable'})"))
            continue
        written = line.split(None, 1)[0] if line.startswith("@") else " ".join(line.split()[:5])
        if written == "@reboot":
            out.refused.append(Refused(no, raw, "@reboot has no schedule (start it from a systemd unit instead)"))
            continue
        if written.startswith("@") and written not in SPECIALS:
            out.refused.append(Refused(no, raw, f"unknown schedule {written}"))
            continue
        schedule = SPECIALS.get(written, written)
        cmd_part = _command_text(line, item)
        if _UNESCAPED_PCT.search(cmd_part):
            out.refused.append(Refused(no, raw, "unescaped % (cron sends the text after it to stdin)"))
            continue
        command = cmd_part.replace("\\%", "%")
        if item.comment:
            intent_lines.append(item.comment)
        base = prefix + _slug(command)
        taken[base] = taken.get(base, 0) + 1
        name = base if taken[base] == 1 else f"{base}-{taken[base]}"
        job_env = {k: v for k, v in env.items() if k not in ("MAILTO", "CRON_TZ", "TZ", "SHELL")}
        shell = env.get("SHELL")
        fields: dict[str, Any] = {
            "name": name, "schedule": schedule,
            "command": command if not shell or shell == "/bin/sh" else [shell, "-c", command],
        }
        if job_env:
            fields["env"] = job_env
        tz = env.get("CRON_TZ") or env.get("TZ")
        if tz:
            fields["timezone"] = tz
        if env.get("MAILTO"):
            fields["owner"] = env["MAILTO"]
        if intent_lines:
            fields["intent"] = " ".join(intent_lines)[:500]
        try:
            JobSpec(**fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "spec"
            out.refused.append(Refused(no, raw, f"field '{where}': {err['msg'].removeprefix('Value error, ')}"))
            continue
        out.jobs.append(CronJob(no, raw, fields, cron_schedule=written, cron_command=cmd_part))
    return out


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _read_item(line: str) -> tuple[Any, str | None]:
    """python-crontab's reading of one job line, or (None, its complaint). Its complaints go
    to its logger; they are caught here so they become the refusal's reason, not stray output."""
    log = logging.getLogger("crontab")
    collect = _Collect()
    saved = log.propagate
    log.addHandler(collect)
    log.propagate = False
    try:
        item = next(iter(CronTab(tab=line + "\n")), None)
    finally:
        log.removeHandler(collect)
        log.propagate = saved
    if item is None or not item.is_valid():
        return None, "; ".join(collect.messages)[:200] or None
    return item, None


def _command_text(line: str, item: Any) -> str:
    """The command part of a job line as written (after five fields or an @special), without
    a trailing ``# comment`` python-crontab takes as the job's comment."""
    n = 1 if line.startswith("@") else 5
    parts = line.split(None, n)
    cmd = parts[n] if len(parts) > n else ""
    if item.comment:
        cmd = re.sub(r"\s*#\s*" + re.escape(item.comment) + r"\s*$", "", cmd)
    return cmd.strip()


def _toml_value(value: Any) -> str:
    import json
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def spec_toml(job: CronJob, source: str) -> str:
    """The job spec file text for ``job`` (TOML), citing where it came from."""
    lines = [f"# imported from {source}, line {job.line}:", f"#   {job.text.strip()}"]
    for key in ("name", "schedule", "timezone", "command", "env", "owner", "intent"):
        if key in job.fields:
            lines.append(f"{key} = {_toml_value(job.fields[key])}")
    return "\n".join(lines) + "\n"


def rewrite(imp: CrontabImport, *, watchkeeper: str, ledger: str | None, jobs_dir: str | None) -> str:
    """The crontab with each taken line running under ``watchkeeper exec --job NAME``; every
    other line (environment, comments, refused lines) as it was."""
    by_line = {j.line: j for j in imp.jobs}
    out = []
    for no, raw in enumerate(imp.lines, 1):
        job = by_line.get(no)
        if job is None:
            out.append(raw)
            continue
        argv = [watchkeeper, "exec", "--job", job.name]
        if ledger:
            argv += ["--ledger", ledger]
        if jobs_dir:
            argv += ["--jobs", jobs_dir]
        # The command stays as cron wrote it (\% escapes included: cron still reads this line).
        shell = job.fields["command"][0] if isinstance(job.fields["command"], list) else "/bin/sh"
        out.append(f"{job.cron_schedule} {shlex.join(argv)} -- {shell} -c {shlex.quote(job.cron_command)}")
    return "\n".join(out) + "\n"
