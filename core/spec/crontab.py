"""Cron adoption: read a crontab (python-crontab) into job specs, or rewrite it so each line
runs under ``watchkeeper exec``.

Two formats: a user's crontab (``crontab -l``, ``/var/spool/cron/…``) and a system crontab
(``/etc/crontab``, ``/etc/cron.d/*``), which has a user column between the schedule and the
command. ``detect`` tells them apart by the file's path, else by the content when it is
unambiguous; the caller may also say (``--system``/``--user``). The user column becomes the
job's ``user`` and stays before the wrapper in a rewritten line (cron needs it there).

What carries over: the schedule (``@daily`` and friends become five-field expressions),
the command (run through ``$SHELL -c`` as cron does, ``\\%`` unescaped), environment lines
above a job (``NAME=value``; ``CRON_TZ``/``TZ`` → ``timezone``; ``MAILTO`` → ``owner``), the
folder cron runs it in (``HOME``, else the user's home) as ``cwd``, and the comment block
right above a job or on its line → ``intent``, without crontab's template comments
(``m h dom mon dow command``, ``Example of job definition``, commented-out jobs).

What cannot (each named with its line number, never dropped silently): ``@reboot`` (no
schedule: a systemd unit's job), an unescaped ``%`` (cron feeds the rest to stdin), a
schedule cronsim or the job spec refuses, a six-field line (a Quartz seconds field, which
cron would read as the start of the command; taken as cron reads it with ``force``), and a
line that is neither a job, an environment line nor a comment.

Job names say what does the work: the program or script after any ``cd``/``source``/env
assignment, wrapper (``sudo``, ``nice``, ``timeout``, ``flock``, ``docker exec``) and
interpreter (``python``, ``bash``, ``php``), e.g. ``cd /srv/app && ./sync_feeds.py`` →
``sync_feeds``, ``docker exec web php artisan schedule:run`` → ``schedule-run``; unique
within the import (``-2``, ``-3``).
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal

from crontab import CronTab
from pydantic import ValidationError

from core.spec.model import NAME_RE, USER_RE, JobSpec
from core.spec.preflight import SHELL_WORDS

Format = Literal["user", "system"]

SPECIALS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
            "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_ENV_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_UNESCAPED_PCT = re.compile(r"(?<!\\)%")
#: A token that reads as a cron time field (numbers, ``*``, ``?``, ranges, steps, lists,
#: Quartz's L/W/#, month and weekday names): a sixth one is a seconds (or year) field.
_NAMES = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT"
_TIME_FIELD = re.compile(rf"^(?:[0-9*?]|(?:{_NAMES})\b)[0-9*?/,\-LW#]*(?:(?:{_NAMES})[0-9*?/,\-LW#]*)*$", re.I)


@dataclass
class CronJob:
    """One crontab line taken: its 1-based ``line``, the original text, the spec fields
    (``name``, ``schedule``, ``command``, ``cwd``, ``user``, ``env``, ``timezone``, ``owner``,
    ``intent``) and the schedule, user column and command as cron sees them (for the rewrite)."""

    line: int
    text: str
    fields: dict[str, Any]
    cron_schedule: str
    cron_command: str
    cron_user: str | None = None

    @property
    def name(self) -> str:
        return str(self.fields["name"])


@dataclass
class Refused:
    """A line that could not be taken (or, as a warning, was taken with a caveat), with why
    (shown as ``line N: reason: text``)."""

    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        text = self.text.strip()
        return f"line {self.line}: {self.reason}" + (f": {text[:120]}" if text else "")


@dataclass
class CrontabImport:
    """The result of ``parse``: jobs taken, lines refused and warnings, in file order; every
    line with its own line ending (for a byte-for-byte rewrite); the format read and how it
    was told."""

    jobs: list[CronJob] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    warnings: list[Refused] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)      # without their endings
    endings: list[str] = field(default_factory=list)    # "\n", "\r\n", "" (a last line without one)
    format: Format = "user"
    format_why: str = ""


# -- format --------------------------------------------------------------------------------
_SYSTEM_PLACES = ("/etc/crontab",)
_SYSTEM_FOLDERS = ("/etc/cron.d",)
_SPOOL_FOLDERS = ("/var/spool/cron/crontabs", "/var/spool/cron", "/var/cron/tabs")
#: Accounts most systems have, so a user column naming one is told from a command even on a
#: machine that lacks it (importing another host's crontab).
_COMMON_ACCOUNTS = frozenset({"root", "www-data", "nobody", "daemon", "postgres", "mysql", "apache", "nginx",
                              "backup", "pi", "ubuntu", "debian", "admin", "http", "wwwrun", "git", "redis",
                              "munin", "nagios", "zabbix", "smmsp", "mail", "news", "list", "operator"})


def spool_owner(path: str | None) -> str | None:
    """The account a user crontab in cron's spool belongs to (its file name), else None."""
    if not path:
        return None
    p = PurePosixPath(path)
    return p.name if str(p.parent) in _SPOOL_FOLDERS and USER_RE.match(p.name) else None


def _schedule_len(words: list[str]) -> int:
    return 1 if words and words[0].startswith("@") else 5


def _known_account(name: str) -> bool:
    if name in _COMMON_ACCOUNTS:
        return True
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _commandish(word: str) -> bool:
    """A word that starts a command: a path, an assignment, a shell word, or a program on PATH."""
    return ("/" in word or "=" in word or word.startswith(("~", ".", "$", "(", "{", "[", '"', "'"))
            or word in SHELL_WORDS or shutil.which(word) is not None)


def detect(lines: list[str], path: str | None) -> tuple[Format, str]:
    """Which format ``lines`` are in, and how that was told (for a warning when it is a guess).

    By the path: ``/etc/crontab`` and ``/etc/cron.d/*`` are system crontabs, cron's spool
    holds user crontabs. Else by the job lines: a system crontab when every one has a user
    column (a word that is no command, followed by a command) and one of them names a known
    account (this machine's, or one most systems have); a user crontab when any line's
    command starts right after the schedule (a path, a program on PATH, a shell word).
    Neither: a user crontab, said to be a guess."""
    if path:
        p = PurePosixPath(path)
        if str(p) in _SYSTEM_PLACES or str(p.parent) in _SYSTEM_FOLDERS:
            return "system", f"{path} is a system crontab (user column)"
        if spool_owner(path) is not None:
            return "user", f"{path} is a user crontab"
    system_lines = user_lines = 0
    known = False
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#") or (_ENV_RE.match(line) and not line[0].isdigit()
                                                 and not line.startswith(("*", "@"))):
            continue
        words = line.split()
        n = _schedule_len(words)
        if len(words) <= n:
            continue
        first = words[n]
        if _TIME_FIELD.match(first) and n == 5:
            continue  # a sixth time field: says nothing about a user column
        if len(words) > n + 1 and USER_RE.match(first) and not _commandish(first) and _commandish(words[n + 1]):
            system_lines += 1
            known = known or _known_account(first)
        elif _commandish(first):
            user_lines += 1
        elif len(words) > n + 1 and USER_RE.match(first) and _known_account(first) and not words[n + 1].startswith("-"):
            system_lines += 1
            known = True
    if system_lines and not user_lines and known:
        return "system", "its lines have a user column"
    if user_lines and not system_lines:
        return "user", "its lines have no user column"
    if not system_lines and not user_lines:
        return "user", "no job lines"
    return "user", ("could not tell whether it has a user column (a system crontab); read as a user crontab"
                    " — pass --system or --user")


# -- names -----------------------------------------------------------------------------------
#: A segment starting with one of these prepares for the work (``cd /x &&``, ``sleep 30;``).
_SETUP = frozenset({"cd", "source", ".", "export", "set", "umask", "ulimit", "sleep", "test", "[", "[[", "true",
                    ":", "unset", "shopt", "trap", "wait", "mkdir", "touch", "renice"})
#: Programs that run another program: (options that take a value, positionals before it).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0), "ionice": (frozenset({"-c", "-n", "-p", "-t"}), 0),
    "nohup": (frozenset(), 0), "time": (frozenset({"-f", "-o"}), 0), "exec": (frozenset({"-a"}), 0),
    "command": (frozenset(), 0), "chronic": (frozenset(), 0), "setsid": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0), "env": (frozenset({"-u", "-C", "-S"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "flock": (frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), 1),
    "run-one": (frozenset(), 0), "cronic": (frozenset(), 0), "systemd-cat": (frozenset({"-t", "-p"}), 0),
    "xvfb-run": (frozenset({"-a", "-s", "-n", "-f", "-e"}), 0), "caffeinate": (frozenset(), 0),
    "lckdo": (frozenset({"-w"}), 1), "withlock": (frozenset(), 1), "ssh-agent": (frozenset(), 0),
}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})
#: Interpreters: the script they run is the work; their options with a value.
_INTERPRETERS: dict[str, frozenset[str]] = {
    "python": frozenset({"-W", "-X", "-c"}), "perl": frozenset({"-I", "-M", "-e"}), "ruby": frozenset({"-I", "-r", "-e"}),
    "node": frozenset({"-r", "--require", "-e"}), "nodejs": frozenset({"-r", "-e"}), "php": frozenset({"-c", "-d"}),
    "php-cli": frozenset({"-c", "-d"}), "rscript": frozenset(), "deno": frozenset(), "bun": frozenset(),
    "java": frozenset({"-cp", "-classpath"}), "pwsh": frozenset({"-File"}), "lua": frozenset(), "tclsh": frozenset(),
    "osascript": frozenset(), "uv": frozenset(), "poetry": frozenset(), "pipenv": frozenset(), "npx": frozenset(),
}
#: Scripts that dispatch to a subcommand (``php artisan schedule:run``): the subcommand names the job.
_DISPATCHERS = frozenset({"artisan", "manage", "console", "occ", "rake", "drush", "wp", "symfony", "bench", "yii",
                          "cake", "craft", "spark", "flask", "django-admin", "make", "npm", "yarn", "pnpm"})
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&", "((", "))"})
_SCRIPT_EXT = re.compile(r"\.(?:sh|bash|py|php|pl|rb|js|mjs|ts|jar|r|lua|ps1|cgi|exe)$", re.I)


def _words(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        return list(lex)
    except ValueError:
        return command.split()


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell command line, in order, without redirections."""
    out: list[list[str]] = [[]]
    words = _words(command)
    i = 0
    while i < len(words):
        w = words[i]
        if w in _OPERATORS:
            out.append([])
        elif w and w[0] in "<>" or w in (">&", "<&", ">>", "&>"):
            i += 1  # a redirection and its target
        elif w in ("{", "}", "!", "then", "do", "else", "if", "while", "until"):
            pass
        else:
            out[-1].append(w)
        i += 1
    return [s for s in out if s]


def _stem(word: str) -> str:
    return _SCRIPT_EXT.sub("", PurePosixPath(word.rstrip("/")).name)


def _program(word: str) -> str:
    """A program's plain name: its base name, without a version (``python3.11`` → ``python``)."""
    base = PurePosixPath(word).name.lower()
    return re.sub(r"(?<=[a-z])[0-9][0-9.]*$", "", base) or base


def _after_options(words: list[str], i: int, takes_value: frozenset[str]) -> int:
    """The index of the first word from ``i`` that is not an option (or an option's value)."""
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return i + 1
        i += 2 if words[i] in takes_value else 1
    return i


#: Options of dispatchers that take a value (``make -C DIR target``).
_DISPATCH_VALUED = frozenset({"-C", "-f", "--file", "--directory", "--prefix", "-e", "--env", "--settings"})


def _subcommand(words: list[str], i: int) -> str | None:
    j = _after_options(words, i, _DISPATCH_VALUED)
    return words[j] if j < len(words) else None


def _work(words: list[str], depth: int) -> str | None:
    """The name of what one simple command does, or None for a setup step."""
    i = 0
    while i < len(words) and _ENV_RE.match(words[i]) and "=" in words[i]:
        i += 1  # FOO=bar cmd
    while i < len(words):
        word = words[i]
        prog = _program(word)
        if prog in _SETUP or (i == 0 and word in SHELL_WORDS and prog not in _WRAPPERS):
            return None
        if prog in _WRAPPERS:
            takes, positionals = _WRAPPERS[prog]
            i = _after_options(words, i + 1, takes)
            while i < len(words) and _ENV_RE.match(words[i]) and "=" in words[i]:
                i += 1  # env FOO=bar cmd, sudo FOO=bar cmd
            i += positionals
            continue
        if prog == "su":
            for j in range(i + 1, len(words) - 1):
                if words[j] in ("-c", "--command"):
                    return job_name(words[j + 1], depth + 1)
            return "su"
        if prog in ("docker", "podman", "docker-compose", "kubectl"):
            return _container(words, i, depth) or prog
        if prog in _SHELLS:
            j = i + 1
            while j < len(words) and words[j].startswith("-"):
                if "c" in words[j][1:] and not words[j].startswith("--") and j + 1 < len(words):
                    return job_name(words[j + 1], depth + 1)
                j += 1
            return _stem(words[j]) if j < len(words) else prog
        if prog in _INTERPRETERS:
            j = i + 1
            while j < len(words) and words[j].startswith("-"):
                if words[j] == "-m" and j + 1 < len(words):
                    return words[j + 1]
                if prog == "java" and words[j] == "-jar" and j + 1 < len(words):
                    return _stem(words[j + 1])
                j += 2 if words[j] in _INTERPRETERS[prog] else 1
            if prog in ("uv", "poetry", "pipenv") and j < len(words) and words[j] == "run":
                return _work(words[j + 1:], depth) if depth < 3 else None
            if j >= len(words):
                return prog
            return _dispatch(words, j) or _stem(words[j])
        if prog == "run-parts":
            args = [w for w in words[i + 1:] if not w.startswith("-")]
            return _stem(args[-1]) if args else prog
        return _dispatch(words, i) or _stem(word)
    return None


def _dispatch(words: list[str], i: int) -> str | None:
    """For a dispatcher script (``artisan``, ``manage.py``, ``bin/console``, ``make``), its
    subcommand (``schedule:run``), else None."""
    if _stem(words[i]).lower() not in _DISPATCHERS:
        return None
    sub = _subcommand(words, i + 1)
    if sub is None:
        return None
    if _program(words[i]) in ("npm", "yarn", "pnpm") and sub == "run":
        sub = _subcommand(words, words.index(sub, i + 1) + 1) or sub
    return sub


def _container(words: list[str], i: int, depth: int) -> str | None:
    """``docker exec [opts] CONTAINER CMD…``, ``docker compose exec|run SVC CMD…``, ``docker run
    [opts] IMAGE [CMD…]``, ``kubectl exec … -- CMD…``: the name of CMD (else the image)."""
    rest = words[i + 1:]
    if "--" in rest and _program(words[i]) == "kubectl":
        return _work(rest[rest.index("--") + 1:], depth + 1)
    if rest[:1] == ["compose"]:
        rest = rest[1:]
    # docker compose -f FILE -p NAME exec …
    rest = rest[_after_options(rest, 0, frozenset({"-f", "--file", "-p", "--project-name", "--env-file",
                                                   "--profile", "--project-directory", "-H", "--host",
                                                   "--context", "-c", "--config"})):]
    if not rest or rest[0] not in ("exec", "run"):
        return None
    valued = frozenset({"-u", "--user", "-w", "--workdir", "-e", "--env", "--env-file", "-v", "--volume", "--name",
                        "--network", "--net", "-p", "--publish", "--entrypoint", "--mount", "-l", "--label",
                        "--restart", "-h", "--hostname", "--add-host", "--cpus", "-m", "--memory", "--device",
                        "--cap-add", "--security-opt", "--tmpfs", "--ulimit", "--log-driver", "--platform",
                        "-c", "--container", "-n", "--namespace", "--index"})
    j = _after_options(rest, 1, valued)
    if j >= len(rest):
        return None
    target = rest[j]
    cmd = rest[j + 1:]
    if cmd and depth < 3:
        return _work(cmd, depth + 1) or None
    return _stem(target.split(":")[0]) if rest[0] == "run" else None


def job_name(command: str, depth: int = 0) -> str | None:
    """What does the work in a crontab command, as a raw name (see the module doc), or None."""
    if depth > 3:
        return None
    segments = _segments(command)
    for words in segments:
        name = _work(words, depth)
        if name:
            return name
    # Only setup steps and builtins (`echo ok`, `cd /x && true`): the first one names it.
    return _program(segments[0][0]) if segments and segments[0] else None


def slug(command: str) -> str:
    """A valid job name for ``command``: ``job_name`` cleaned to letters, digits, ``_.-``."""
    raw = job_name(command) or "job"
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-.")[:60].strip("-.")
    return base if base and NAME_RE.match(base) else "job"


# -- intent ----------------------------------------------------------------------------------
#: Comment lines that are crontab's own template or a header ``crontab -l`` adds, not a
#: description of the job below (Debian's user and system templates, cronie, BSD).
_TEMPLATE = re.compile("|".join([
    r"^m\s+h\s+dom\s+mon\s+dow", r"^min(ute)?\s+hour\s+", r"example of job definition", r"^[.|]\s*[-.|]",
    r"^\|", r"user-name\s+command", r"edit this file to introduce tasks", r"crontab\(5\)|cron\(8\)",
    r"system-wide crontab", r"do not edit this file", r"installed on", r"cron version", r"^\*\s+\*\s+\*",
    r"each task to run has to be defined", r"indicating with different fields", r"and what command to run",
    r"to define the time you can provide", r"minute \(m\), hour \(h\)", r"and day of week \(dow\)",
    r"notice that tasks will be started", r"daemon's notion of time", r"output of the crontab jobs",
    r"email to the user the crontab file", r"for example, you can run a backup", r"at 5 a\.m every week",
    r"for more information see", r"unlike any other crontab", r"command to install the new version",
    r"and files in /etc/cron\.d", r"that none of the other crontabs do", r"you can also override path",
]), re.I)


def _boilerplate(comment: str) -> bool:
    """A comment that says nothing about the job below: template text, or a commented-out
    job or environment line."""
    if _TEMPLATE.search(comment):
        return True
    words = comment.split()
    if _ENV_RE.match(comment) and " " not in comment.split("=", 1)[0]:
        return True
    if words and words[0].startswith("@") and words[0] in {*SPECIALS, "@reboot"}:
        return True
    return len(words) > 5 and all(_TIME_FIELD.match(w) for w in words[:5])


def _intent(comments: list[str]) -> list[str]:
    """The comment lines above a job that describe it: those after the block's last template
    line, without commented-out lines and empty ones."""
    last = max((i for i, c in enumerate(comments) if _TEMPLATE.search(c)), default=-1)
    return [c for c in comments[last + 1:] if c and not _boilerplate(c)]


# -- reading -------------------------------------------------------------------------------
def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


#: A byte that was not UTF-8, as ``open(..., errors="surrogateescape")`` reads it.
_SURROGATE = re.compile("[\udc80-\udcff]")


def split_lines(text: str) -> tuple[list[str], list[str]]:
    """``text`` cut at each newline as cron cuts it: the lines without their endings, and the
    endings (``"\\n"``, ``"\\r\\n"``, or ``""`` for a last line without a newline)."""
    pieces = text.split("\n")
    last_open = pieces.pop() if pieces else ""
    lines, endings = [], []
    for p in pieces:
        body = p.rstrip("\r")
        lines.append(body)
        endings.append(p[len(body):] + "\n")
    if last_open:
        body = last_open.rstrip("\r")
        lines.append(body)
        endings.append(last_open[len(body):])
    return lines, endings


def default_home(user: str | None) -> str | None:
    """The home folder cron would start ``user``'s jobs in (this process's user for None), or
    None when this machine has no such account."""
    try:
        pw = pwd.getpwuid(os.getuid()) if user is None else pwd.getpwnam(user)
    except KeyError:
        return None
    return pw.pw_dir


def _split_user(line: str, n: int) -> tuple[str, str] | None:
    """For a system crontab line, (the user column, the line without it); None when there is
    no command after the user."""
    m = re.match(rf"^(\s*(?:\S+\s+){{{n}}})(\S+)\s+(\S.*)$", line)
    if m is None:
        return None
    return m.group(2), m.group(1) + m.group(3)


def parse(text: str, *, prefix: str = "", fmt: Format | None = None, path: str | None = None,
          force: bool = False, home: Callable[[str | None], str | None] = default_home) -> CrontabImport:
    """Read crontab ``text`` line by line (python-crontab parses each job line).

    Args:
        text: the crontab, read with ``errors="surrogateescape"``: a line with bytes that are
            not UTF-8 is refused (and a comment with them gives no intent), so ``rewrite``
            leaves it byte for byte.
        prefix: put before every job name.
        fmt: ``"system"`` (a user column) or ``"user"``; None: ``detect`` from ``path`` and
            the content (a guess is added to ``warnings``).
        path: where the crontab was read from (``/etc/cron.d/x``), None for stdin.
        force: take six-field lines as cron reads them (the sixth field starts the command).
        home: the home folder of an account (None: this process's), for ``cwd``.

    Returns a ``CrontabImport``; it never raises on bad lines (they are ``refused``).
    """
    lines, endings = split_lines(text)
    out = CrontabImport(lines=lines, endings=endings)
    if fmt is None:
        out.format, out.format_why = detect(lines, path)
        if "could not tell" in out.format_why:
            out.warnings.append(Refused(0, "", out.format_why))
    else:
        out.format, out.format_why = fmt, f"--{fmt}"
    owner = spool_owner(path) if out.format == "user" else None
    env: dict[str, str] = {}
    comments: list[str] = []
    taken: dict[str, int] = {}
    for no, raw in enumerate(lines, 1):
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
        intent_lines = _intent(comments)
        comments = []
        job = _job(out, no, raw, line, env=env, intent_lines=intent_lines, owner=owner, force=force, home=home)
        if job is None:
            continue
        naming = job.cron_command.replace("\\%", "%")
        first = naming.split(None, 1)
        if len(first) == 2 and _TIME_FIELD.match(first[0]):
            naming = first[1]  # a forced six-field line: the work follows the stray field
        base = prefix + slug(naming)
        taken[base] = taken.get(base, 0) + 1
        job.fields["name"] = base if taken[base] == 1 else f"{base}-{taken[base]}"
        try:
            JobSpec(**job.fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "spec"
            out.refused.append(Refused(no, raw, f"field '{where}': {err['msg'].removeprefix('Value error, ')}"))
            continue
        out.jobs.append(job)
    return out


def _job(out: CrontabImport, no: int, raw: str, line: str, *, env: dict[str, str], intent_lines: list[str],
         owner: str | None, force: bool, home: Callable[[str | None], str | None]) -> CronJob | None:
    """One job line read (its name still to be given), or None with the reason in ``out``."""
    words = line.split()
    n = _schedule_len(words)
    if n == 5 and len(words) > 5 and _TIME_FIELD.match(words[5]):
        why = (f"six time fields ('{' '.join(words[:6])}': a seconds field, Quartz style?); cron reads the sixth"
               f" ('{words[5]}') as the start of the command")
        if not force:
            out.refused.append(Refused(no, raw, why + "; left out (--force takes it as cron reads it)"))
            return None
        out.warnings.append(Refused(no, raw, why + "; taken as cron reads it (--force)"))
    user = owner
    cron_user = None
    if out.format == "system":
        split = _split_user(line, n)
        if split is None:
            out.refused.append(Refused(no, raw, "no user column and command (a system crontab line is"
                                                " 'schedule user command')"))
            return None
        cron_user, line = split
        if not USER_RE.match(cron_user):
            out.refused.append(Refused(no, raw, f"user column {cron_user!r} is not an account name"))
            return None
        user = cron_user
    item, problem = _read_item(line)
    if item is None:
        out.refused.append(Refused(no, raw, f"not a cron job line ({problem or 'unreadable'})"))
        return None
    written = line.split(None, 1)[0] if line.startswith("@") else " ".join(line.split()[:5])
    if written == "@reboot":
        out.refused.append(Refused(no, raw, "@reboot has no schedule (start it from a systemd unit instead)"))
        return None
    if written.startswith("@") and written not in SPECIALS:
        out.refused.append(Refused(no, raw, f"unknown schedule {written}"))
        return None
    cmd_part, inline = _command_text(line, item)
    if _UNESCAPED_PCT.search(cmd_part):
        out.refused.append(Refused(no, raw, "unescaped % (cron sends the text after it to stdin)"))
        return None
    command = cmd_part.replace("\\%", "%")
    if inline:
        intent_lines = [*intent_lines, inline]
    job_env = {k: v for k, v in env.items() if k not in ("MAILTO", "CRON_TZ", "TZ", "SHELL")}
    shell = env.get("SHELL")
    fields: dict[str, Any] = {
        "name": "job", "schedule": SPECIALS.get(written, written),
        "command": command if not shell or shell == "/bin/sh" else [shell, "-c", command],
    }
    # cron starts a job in HOME (a HOME= line, else the account's home): so must the runner,
    # or ./manage.py and bin/console would be looked for in the spec's folder.
    cwd = env.get("HOME") or home(user)
    if cwd:
        fields["cwd"] = cwd
    else:
        out.warnings.append(Refused(no, raw, f"no user {user!r} on this machine: 'cwd' left out (cron runs the job"
                                             f" in {user}'s home folder)"))
    if user is not None:
        fields["user"] = user
    if job_env:
        fields["env"] = job_env
    tz = env.get("CRON_TZ") or env.get("TZ")
    if tz:
        fields["timezone"] = tz
    if env.get("MAILTO"):
        fields["owner"] = env["MAILTO"]
    if intent_lines:
        fields["intent"] = " ".join(intent_lines)[:500]
    return CronJob(no, raw, fields, cron_schedule=written, cron_command=cmd_part, cron_user=cron_user)


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


def _shell_comment_at(cmd: str) -> int | None:
    """Where a shell comment starts in ``cmd`` (the index of its ``#``): a ``#`` outside
    quotes that begins a word, as ``sh -c`` reads it; None when there is none. A ``#`` inside
    quotes (``echo "x # y"``), inside a command substitution (`` `date # x` ``, ``$(…)``) or
    inside a word (``a#b``) is part of the command: taking too little as the comment only
    leaves a remark in the command, taking too much would change what runs."""
    quote = ""
    depth = 0  # open $( … )
    i = 0
    while i < len(cmd):
        c = cmd[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1  # the next character is taken literally (outside single quotes)
        elif quote:
            quote = "" if c == quote else quote
        elif c in "'\"`":
            quote = c
        elif c == "$" and cmd[i + 1:i + 2] == "(":
            depth += 1
            i += 1
        elif c == ")" and depth:
            depth -= 1
        elif c == "#" and not depth and (i == 0 or cmd[i - 1] in " \t"):
            return i
        i += 1
    return None


def _command_text(line: str, item: Any) -> tuple[str, str | None]:
    """The command part of a job line as written (after five fields or an @special) and its
    trailing comment: only a real shell comment (``_shell_comment_at``) is split off, since
    cron hands the whole rest of the line to the shell — python-crontab's own split also cuts
    at a ``#`` inside quotes, which would change the command."""
    n = 1 if line.startswith("@") else 5
    parts = line.split(None, n)
    cmd = parts[n] if len(parts) > n else ""
    at = _shell_comment_at(cmd) if item.comment else None
    if at is None:
        return cmd.strip(), None
    return cmd[:at].strip(), cmd[at + 1:].strip() or None


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
    for key in ("name", "schedule", "timezone", "user", "cwd", "command", "env", "owner", "intent"):
        if key in job.fields:
            lines.append(f"{key} = {_toml_value(job.fields[key])}")
    return "\n".join(lines) + "\n"


def rewrite(imp: CrontabImport, *, watchkeeper: str, ledger: str | None, jobs_dir: str | None) -> str:
    """The crontab with each taken line running under ``watchkeeper exec --job NAME`` (a
    system crontab's user column kept before it, where cron reads it); every other line
    (environment, comments, refused lines) as it was. Each line keeps its own ending (a
    ``\\r`` before the newline stays), and a last line without a newline stays without."""
    by_line = {j.line: j for j in imp.jobs}
    out = []
    for no, (raw, end) in enumerate(zip(imp.lines, imp.endings, strict=True), 1):
        job = by_line.get(no)
        if job is None:
            out.append(raw + end)
            continue
        argv = [watchkeeper, "exec", "--job", job.name]
        if ledger:
            argv += ["--ledger", ledger]
        if jobs_dir:
            argv += ["--jobs", jobs_dir]
        # The command stays as cron wrote it (\% escapes included: cron still reads this line).
        shell = job.fields["command"][0] if isinstance(job.fields["command"], list) else "/bin/sh"
        user = f"{job.cron_user} " if job.cron_user else ""
        indent = raw[:len(raw) - len(raw.lstrip())]
        # cron turns an unescaped % into a newline: a path or a URL's %-escape must reach exec whole.
        ours = shlex.join(argv).replace("%", "\\%")
        out.append(f"{indent}{job.cron_schedule} {user}{ours} -- {shell} -c"
                   f" {shlex.quote(job.cron_command)}{end}")
    return "".join(out)
