"""A job's ``user``: run it as that account when the runner may switch to it, never silently
as the runner's own.

The rule (``resolve``): no ``user``, or the runner's own account → the job runs as the runner
does. Another account → only a runner running as root can switch (``setgid``, ``initgroups``,
``setuid``, in that order, in the job's process just before it ``exec``s the command); for any
other runner the job is an error, named by ``watchkeeper check`` (preflight) and, if it runs
anyway, by its run (``spawn_failed``), never run as the runner's user instead.

The switch is done by ``python -I -m core.runas USER -- ARGV…`` placed in front of the job's
command (``wrap``): it drops to USER and ``exec``s ARGV, so it is not left running, and it
works the same whether the runner starts the job itself or through the per-run monitor.
``-I`` keeps the job's folder (and ``PYTHON*`` variables) out of its import path.
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Mapping
from dataclasses import dataclass


class RunAsError(Exception):
    """The job cannot run as its ``user`` here (one line, for ``check`` and the run's reason)."""


@dataclass(frozen=True)
class Account:
    """A local account a job runs as: its ``name``, ``uid``, primary ``gid`` and ``home``."""

    name: str
    uid: int
    gid: int
    home: str


def _lookup(user: str) -> Account:
    try:
        pw = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, OverflowError):
        raise RunAsError(f"no user {user!r} on this machine") from None
    return Account(pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir)


def runner_account() -> str:
    """The name of the account this process runs as (its uid when it has no name)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def resolve(user: str | None) -> Account | None:
    """The account to switch to for a job with ``user``; None when the job runs as the runner
    does (no ``user``, or the runner's own account).

    Raises:
        RunAsError: no such account, or the runner is not root and ``user`` is another account.
    """
    if user is None:
        return None
    account = _lookup(user)
    if account.uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise RunAsError(f"runs as user {account.name!r}, but the runner runs as {runner_account()!r} and only "
                         "a runner started as root can switch users; run it under that user, or remove 'user'")
    return account


def problem(user: str | None) -> str | None:
    """Why a job with ``user`` cannot run under this process, or None (for preflight)."""
    try:
        resolve(user)
    except RunAsError as exc:
        return str(exc)
    return None


def wrap(argv: list[str], account: Account) -> list[str]:
    """``argv`` run as ``account``: the switch program in front of it (see module doc)."""
    return [sys.executable, "-I", "-m", "core.runas", account.name, "--", *argv]


def environ(env: Mapping[str, str], account: Account, spec_env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``HOME``, ``USER`` and ``LOGNAME`` of ``account``, as cron sets them (the
    job spec's own ``env`` still wins)."""
    out = dict(env)
    for key, value in (("HOME", account.home), ("USER", account.name), ("LOGNAME", account.name)):
        if key not in spec_env:
            out[key] = value
    return out


def hand_over(folder: os.PathLike[str] | str, root: os.PathLike[str] | str, account: Account) -> None:
    """Let ``account`` write its run's ``folder`` (its handoff file): the folder becomes its
    own (mode 0700 stays), and the artifacts ``root`` above gets the search bit for others
    (0711: they can reach a folder they own, never list or read the others). Raises OSError."""
    os.chown(folder, account.uid, account.gid)
    mode = os.stat(root).st_mode & 0o777
    if mode & 0o011 != 0o011:
        os.chmod(root, mode | 0o011)


def main(args: list[str]) -> int:
    """``python -m core.runas USER -- ARGV…``: become USER (groups, group, then user), then
    ``exec`` ARGV. Exit 126 when the switch fails, 127 when ARGV cannot be started."""
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m core.runas USER -- PROGRAM [ARG…]", file=sys.stderr)
        return 2
    try:
        account = _lookup(args[0])
        os.initgroups(account.name, account.gid)
        os.setgid(account.gid)
        os.setuid(account.uid)
        if os.getuid() != account.uid or os.geteuid() != account.uid:
            raise OSError("the user id did not change")
    except (RunAsError, OSError) as exc:
        print(f"watchkeeper: cannot run as user {args[0]!r}: {exc}", file=sys.stderr)
        return 126
    argv = args[2:]
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"watchkeeper: cannot start {argv[0]!r} as user {account.name!r}: {exc.strerror or exc}",
              file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
