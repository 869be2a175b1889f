"""Preflight: what a valid spec still needs from this machine before it can run.

Validation (``core.spec.model``) judges the file; preflight judges the spec against the
host: the job's ``user`` is an account this runner may run it as (``core.runas``), its
``cwd`` is a folder, and every program it would start (``command``,
``fallback``, ``synthesize``, fan-out ``tasks``, ``verify``) can be found and executed —
the checks whose failure would otherwise show up only when the job first runs (a spawn
failure, or ``/bin/sh`` exiting 127). ``watchkeeper check`` reports each problem as a
``SpecError`` (``file:line: job 'x': field 'f': message``), so it reads like any other.

A shell-string command (run as ``/bin/sh -c``), and the STRING of an argv that runs a shell
with ``-c STRING`` (``["/bin/bash", "-c", "backup.sh --full"]``, as ``import-crontab``
writes it), is checked by its first word only when that word is a plain program name: builtins, keywords, assignments and anything with expansions
or redirections are the shell's business and are left alone.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from core import runas
from core.spec.loader import LoadedJob, SpecError, field_line, resolve_cwd

#: Words /bin/sh runs itself: no program needs to exist for them (POSIX special and
#: regular builtins, keywords, and the common dash/bash extras).
SHELL_WORDS = frozenset("""
    ! : . [ [[ { } alias bg break case cd command continue do done echo elif else esac eval exec exit
    export false fc fg fi for function getopts hash if in jobs kill local printf pwd read readonly
    return select set shift source test then time times trap true type ulimit umask unalias unset
    until wait while
""".split())
#: A first word with any of these is an expansion, a redirection or a glob: not a plain name.
_NOT_PLAIN = re.compile(r"[$`=(){};|&<>*?\[\]~\\]")


def _commands(job: LoadedJob) -> Iterator[tuple[tuple[Any, ...], str, list[str] | str]]:
    """(field location, field name for the message, command) of every program the job runs."""
    spec = job.spec
    if spec.command is not None:
        yield ("command",), "command", spec.command
    if spec.fallback is not None:
        yield ("fallback",), "fallback", spec.fallback
    if spec.synthesize is not None:
        yield ("synthesize",), "synthesize", spec.synthesize
    for i, task in enumerate(spec.tasks):
        yield ("tasks", i, "command"), f"tasks.{task.name}.command", task.command
    for i, check in enumerate(spec.verify):
        yield ("verify", i, "command"), f"verify[{i}]", check.command


#: Shells whose ``-c STRING`` argv is a shell-string command in disguise (what
#: ``import-crontab`` writes: ``["/bin/bash", "-c", "backup.sh --full"]``).
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})


def _shell_string(argv: list[str]) -> str | None:
    """The STRING of a ``[sh|bash|…, -c, STRING, …]`` argv (also ``-ec``, ``-lc``), else None."""
    if len(argv) < 3 or os.path.basename(argv[0]) not in SHELLS:
        return None
    flag = argv[1]
    if flag.startswith("-") and not flag.startswith("--") and "c" in flag[1:]:
        return argv[2]
    return None


def _programs(command: list[str] | str) -> Iterator[tuple[str, bool]]:
    """(program, is the first word of a shell string) of every program a command starts:
    an argv's program, and for a shell's ``-c STRING`` argv also the string's first word."""
    if isinstance(command, list):
        if command:
            yield command[0], False
            inner = _shell_string(command)
            first = _program(inner) if inner is not None else None
            if first is not None:
                yield first, True
        return
    first = _program(command)
    if first is not None:
        yield first, True


def _program(command: list[str] | str) -> str | None:
    """The program a command starts, or None when only the shell knows (see module doc)."""
    if isinstance(command, list):
        return command[0] if command else None
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None  # unbalanced quotes: /bin/sh will say so, and more precisely
    if not words:
        return None
    first = words[0]
    if first in SHELL_WORDS or _NOT_PLAIN.search(first):
        return None
    return first


def _find(program: str, cwd: Path, path_var: str | None) -> str | None:
    """Why ``program`` cannot be executed from ``cwd`` with ``PATH=path_var``, or None."""
    if "/" in program:
        p = Path(program) if os.path.isabs(program) else cwd / program
        if not p.exists():
            return f"{program!r} does not exist" + ("" if os.path.isabs(program) else f" (relative to {cwd})")
        if p.is_dir():
            return f"{program!r} is a folder, not a program"
        if not os.access(p, os.X_OK):
            return f"{program!r} is not executable (chmod +x?)"
        return None
    if shutil.which(program, path=path_var) is None:
        return f"{program!r} not found on PATH"
    return None


def preflight(job: LoadedJob, environ: Mapping[str, str] | None = None) -> list[SpecError]:
    """Problems that would stop ``job`` from running on this machine, in file order.

    Args:
        job: a validated spec with its source file (``load_dir``'s ``jobs`` values).
        environ: the environment the runner would start with (default ``os.environ``); the
            job's own ``env`` is laid over it, so a ``PATH`` in the spec is the one searched,
            as the spawned process's exec searches it.

    Returns:
        One ``SpecError`` per problem, all of them at once: ``cwd`` not a folder, and each
        program not found or not executable (a relative one is skipped when ``cwd`` is not a
        folder). Empty when the job can start. Never raises.
    """
    spec = job.spec
    env = dict(os.environ if environ is None else environ)
    env.update(spec.env)
    cwd = Path(resolve_cwd(job))
    problems: list[SpecError] = []
    cwd_ok = cwd.is_dir()
    if not cwd_ok:
        what = "is not a folder" if cwd.exists() else "does not exist"
        problems.append(SpecError(job.source, field_line(job, ("cwd",)), spec.name, "cwd",
                                  f"{cwd} {what}: the run would fail to start"))
    why_user = runas.problem(spec.user)
    if why_user is not None:
        problems.append(SpecError(job.source, field_line(job, ("user",)), spec.name, "user",
                                  f"{why_user}: the run would fail to start"))
    for loc, name, command in _commands(job):
        for program, in_shell in _programs(command):
            if not cwd_ok and "/" in program and not os.path.isabs(program):
                continue  # a relative program cannot be judged without its folder: the cwd line says why
            why = _find(program, cwd, env.get("PATH", os.defpath))
            if why:
                shell = " (first word of the shell command)" if in_shell else ""
                then = "this check would fail" if loc[0] == "verify" else "the run would fail to start"
                problems.append(SpecError(job.source, field_line(job, loc), spec.name, name,
                                          f"{why}{shell}: {then}"))
    return sorted(problems, key=lambda e: e.line if e.line is not None else 1 << 30)
