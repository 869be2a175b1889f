"""The per-run monitor: what holds a job's output and exit status, so a run outlives its runner.

A process cannot report its own death, and the runner is a process too: when it stops,
crashes or is upgraded, the jobs it started must go on, their output must not lose its
reader, and their exit status must still be known afterwards. Like containerd's shim or
conmon, every run gets a tiny monitor of its own, never a Python interpreter. There are two,
keeping one protocol (the files below), so every reader here works with either:

* **the C monitor** (``watchkeeper-monitor``, ``core/monitor_c/watchkeeper-monitor.c``),
  built into the virtualenv by ``make``: one process per run, about 0.8 MB of RSS (a static
  binary), used whenever it is found (``program``);
* **the sh monitor** (``SCRIPT``, ``TIMER``): a POSIX ``sh`` with helpers (eight processes a
  run, about 12 MB of RSS summed over them, 0.85 MB of PSS), used where the binary is
  absent (no C compiler when the virtualenv was made, or a plain ``pip install``), or forced
  with ``WATCHKEEPER_MONITOR=sh`` (``CHOICE``).

The runner starts it in a session of its own (runner's Ctrl-C and hangup never reach it); the
monitor

* starts the job in a process group of its own (the C monitor: in the monitor's session,
  which has no controlling terminal; the sh one: in a session of its own), stdin
  ``/dev/null``, no other fd, SIGINT and SIGQUIT at their defaults, the run markers renamed
  for the job (``env``), and prints the job's pid once (the runner reads it and records it
  in ``runs.pid``/``pgid``). The C monitor makes the job's group itself (``setpgid`` on its
  child, as a shell does) and prints the pid at once, so it already leads its group without
  waiting for the child to run; the sh one prints ``$!`` at once, before the job's
  ``setsid`` (``spawn.Monitored.kill`` also signals the pid for that case). A
  background job of a non-interactive shell has SIGINT and SIGQUIT ignored for good, so the
  sh monitor starts it through GNU ``env --default-signal=INT,QUIT``; without that option
  (``background_env``) the job runs in the foreground through an inner ``sh``, which hands
  on what the runner's process ignores (so the CLI restores SIGINT and SIGQUIT at its start:
  ``core.processes.restore_job_signals``);
* reads the job's stdout and stderr (the C monitor from its own pipes in its one poll loop;
  the sh one from two FIFOs, each drained by ``stdbuf -o0 head -c HEAD`` then ``dd | tail``):
  the first HEAD bytes go to ``STREAM.log`` as they come (readable while the run goes on,
  ``watchkeeper logs -f``); the rest is counted and only its last TAIL bytes are kept on
  disk, so a job printing 2 GB leaves at most ``output_cap`` bytes per stream, and the pipe
  is always drained, so the job never blocks on it;
* keeps the job's deadline itself (the C monitor in its loop, the sh one through ``TIMER``,
  a keeper that leaves as soon as the monitor does): at the timeout it marks ``timed_out``
  and ends the job's process group (SIGTERM, SIGKILL after the grace), so a timeout holds
  while no runner is there; nothing is signalled once the job's status is written;
* waits for the job and writes its status to ``exit`` (``$?`` as a shell reports it, a
  newline-terminated integer, over a blank line made before the job could run: by
  ``prepare`` for the sh monitor, by the C monitor itself just after it printed the pid;
  so a disk that fills meanwhile still keeps it), then reads the pipes to their end and exits with that status too.

Nothing in it depends on the runner: the runner can be killed with -9 and the job still
completes, its output and status on disk. A runner that starts re-attaches a run whose
monitor is still alive (``monitor_alive``) and records the true end of one whose monitor
left an ``exit`` file (``finish_output``). A run is orphaned only when neither is there. The
C monitor is the reader of the job's pipes, so a C monitor killed on its own (kill -9)
takes the reading end with it: the job's next write ends it by SIGPIPE, and that is the end
recorded (the sh monitor's drains are processes of their own and outlive it).

A shell reports death by signal N as status 128 + N, the same as ``exit 128+N``: statuses
129-192 are recorded as the signal (``decode_status``), as a shell user reads them; the C
monitor reports the same way.

Files in the artifacts folder (all written by the monitor, except what ``prepare`` makes
for the sh monitor: its FIFOs and the blank lines): ``monitor.pid``, ``job.pid``, ``exit`` (one line
each), ``timed_out`` (empty), ``STREAM.log`` (head; after ``finish_output`` the whole kept
output, with an omission marker when over the cap), ``STREAM.count`` (``N bytes``: how many
came past the head), and the tail part, folded into the log at the end: the C monitor's
``STREAM.ring`` (made at the first byte past the head; byte i of that part at offset
i % TAIL, so the file never grows past TAIL) or the sh monitor's ``STREAM.tail`` (written
by ``tail`` at the end); the sh monitor's ``stdout.fifo``/``stderr.fifo``/``timer.fifo``
(removed at the end).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from core.processes import run_child

#: The monitor's name in its argv (``$0``): how a monitor is recognised in the process table.
NAME = "watchkeeper-monitor"
#: The sh monitor itself. Arguments: artifacts folder, head bytes, tail bytes, timeout and grace
#: (seconds; timeout 0: no deadline), the deadline keeper's script (``TIMER``), the ``stdbuf``
#: prefix (empty without it: the head log then grows in 4 KB steps), the ``env`` that can
#: reset signals (empty: the foreground way, see the module's docstring), then the job's argv.
#: ``WKM_RUN``/``WKM_RUNNER`` become the job's ``WATCHKEEPER_RUN_ID``/``_RUNNER_ID``: the
#: monitor and its drains carry no run marker, so nothing that ends a run's leftover
#: processes (the reaper, the sweep) mistakes them for the job's.
#: No open of a stream FIFO ever waits: the monitor holds each one read-write (fds 5, 6) from
#: the start until the job has exited, and hands a read end opened through it (fds 7, 8) to
#: its drain. So the job's own open returns at once (it makes its session right away), and
#: a job killed before it opened its FIFOs still leaves drains that see the end of their
#: input (the monitor's close) instead of waiting forever for a writer. Fd 4 holds the
#: deadline keeper's ``timer.fifo``. Every child closes the fds that are not its own. The
#: job's ``setsid`` comes first, so the pid the runner records leads its own group after one
#: exec (before it, a group signal misses the job: ``spawn.Monitored.kill`` also signals the
#: pid; an earlier monitor printed the pid before its ``setsid`` as well).
SCRIPT = r"""d=$1 h=$2 t=$3 T=$4 g=$5 x=$6 ub=$7 e=$8
shift 8
exec </dev/null 5<>"$d/stdout.fifo" 6<>"$d/stderr.fifo"
exec 7<"$d/stdout.fifo" 8<"$d/stderr.fifo"
echo $$ 1<>"$d/monitor.pid" || ln -sf $$ "$d/monitor.pid"
dp=
drains() {
  for s in stdout:7 stderr:8; do
    { $ub head -c "$h" >"$d/${s%:*}.log"
      LC_ALL=C dd bs=65536 2>"$d/${s%:*}.count" | tail -c "$t" >"$d/${s%:*}.tail"
    } <&"${s#*:}" >/dev/null 2>&1 4>&- 5>&- 6>&- 7<&- 8<&- &
    dp="$dp $!"
  done
  exec 7<&- 8<&-
  if [ "$T" != 0 ]; then
    exec 4<>"$d/timer.fifo"
    setsid sh -c "$x" "$d" "$T" "$g" <"$d/timer.fifo" 4>&- 5>&- 6>&- >/dev/null 2>&1 &
  fi
}
if [ "$e" ]; then
  setsid "$e" -u WKM_RUN -u WKM_RUNNER --default-signal=INT,QUIT WATCHKEEPER_RUN_ID="$WKM_RUN" \
    WATCHKEEPER_RUNNER_ID="$WKM_RUNNER" "$@" >"$d/stdout.fifo" 2>"$d/stderr.fifo" 5>&- 6>&- 7<&- 8<&- &
  j=$!
  echo $j
  exec >/dev/null
  echo $j 1<>"$d/job.pid" || ln -sf $j "$d/job.pid"
  drains
  wait $j
else
  drains
  WATCHKEEPER_RUN_ID=$WKM_RUN WATCHKEEPER_RUNNER_ID=$WKM_RUNNER sh -c 'echo $$; echo $$ 1<>"$0/job.pid" || ln -sf $$ "$0/job.pid"
unset WKM_RUN WKM_RUNNER
exec setsid "$@" >"$0/stdout.fifo" 2>"$0/stderr.fifo"' "$d" "$@" 4>&- 5>&- 6>&-
fi
st=$?
exec 5>&- 6>&-
echo $st 1<>"$d/exit" || ln -sf $st "$d/exit"
exec 4>&- >/dev/null
wait $dp
exit $st
"""
#: The deadline keeper a monitor starts for a job with a timeout, in a session of its own
#: (never one of the monitor's drains). Arguments: folder, timeout and grace (s); its stdin is
#: the folder's ``timer.fifo``, whose only writer is the monitor: when the monitor ends (the
#: job's status written) or is killed, the keeper reads the end of it and leaves at once, so
#: it never outlives its monitor. When the timeout comes first, and the job's status is still
#: not written (its pid cannot have been reused), it marks ``timed_out`` and sends SIGTERM to
#: the job's process group, SIGKILL ``grace`` s later: the timeout holds while no runner is
#: there. A runner's watchdog keeps the same deadline and marks the same file
#: (``mark_timed_out``); whichever comes first ends the job.
TIMER = r"""timeout "$1" head -c1 >/dev/null
[ $? = 124 ] || exit 0
read p <"$0/job.pid" || p=$(readlink "$0/job.pid"); read e <"$0/exit"
[ -n "$p" ] && [ -z "$e" ] && [ ! -L "$0/exit" ] && : >"$0/timed_out" && kill -TERM -"$p" || exit 0
sleep "$2"
kill -KILL -"$p"
"""
#: The variable the monitor and its drains carry and the job never does (``SCRIPT`` unsets
#: it): how the runner's stray search tells the monitor's helpers from the job's processes.
MARK = "WKM_RUN"
STREAMS = ("stdout", "stderr")
#: The FIFOs ``prepare`` makes: the job's two streams and the deadline keeper's stdin.
FIFOS = ("stdout.fifo", "stderr.fifo", "timer.fifo")
SLICE = 4096  # bytes of head and of tail copied into job_outcomes for quick display
#: Statuses a shell gives a job killed by signal N: 128 + N, for N up to SIGRTMAX.
MAX_SIGNAL = 64


def shell() -> str:
    """The POSIX shell the sh monitor runs in (``/bin/sh``)."""
    return "/bin/sh"


#: The environment variable that picks the monitor: unset or empty, the C one when it is
#: there (``program``), else the sh one; ``sh`` for the sh one; ``c`` for the C one or an error.
CHOICE = "WATCHKEEPER_MONITOR"


def program() -> str | None:
    """The C monitor's path (``watchkeeper-monitor``, built into the virtualenv by ``make``),
    or None when the sh monitor is used: ``CHOICE`` says ``sh``, or it is unset and no binary
    is found next to this Python (``sys.executable``) or on ``PATH``. Looked up once per
    choice and process.

    Raises:
        OSError: ``CHOICE`` is ``c`` and there is no binary, or it is neither ``c`` nor ``sh``.
    """
    return _program(os.environ.get(CHOICE, ""))


@functools.cache
def _program(choice: str) -> str | None:
    if choice == "sh":
        return None
    if choice not in ("", "c"):
        raise OSError(f"{CHOICE}={choice!r}: expected 'c', 'sh' or nothing")
    beside = Path(sys.executable).parent / NAME
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which(NAME)
    if found is None and choice == "c":
        raise OSError(f"{CHOICE}=c but there is no {NAME} binary next to {sys.executable} or on PATH"
                      " (`make .venv/.installed` builds it)")
    return os.path.abspath(found) if found else None  # the runner may start it in a job's cwd


def argv(art: Path, cap: int, job_argv: list[str], *, timeout: float = 0.0, grace: float = 0.0) -> list[str]:
    """The monitor's command line for a job ``job_argv`` whose output goes to folder ``art``,
    ``cap`` bytes kept per stream (first half as head, the rest as tail); with ``timeout``
    (seconds, > 0) the monitor ends the job's process group at that deadline itself (SIGTERM,
    SIGKILL ``grace`` seconds later), runner or not. The C monitor (``program``) when there
    is one, else the sh one (``SCRIPT``, ``TIMER``). Raises ``OSError`` as ``program`` does."""
    head = cap // 2
    prog = program()
    if prog is not None:
        return [prog, str(art), str(head), str(cap - head), _seconds(timeout), _seconds(grace), *job_argv]
    return [shell(), "-c", SCRIPT, NAME, str(art), str(head), str(cap - head), _seconds(timeout),
            _seconds(grace), TIMER, stdbuf(), background_env(), *job_argv]


@functools.cache
def stdbuf() -> str:
    """The ``stdbuf -o0`` prefix that makes ``head`` write each read at once (so the log grows
    as the job writes), or "" without GNU ``stdbuf``. Looked up once per process."""
    path = shutil.which("stdbuf")
    return f"{path} -o0" if path else ""


@functools.cache
def background_env() -> str:
    """The path of an ``env`` that takes ``--default-signal`` (GNU coreutils 8.31 and later),
    or "" when there is none (the monitor then starts the job in the foreground). Found
    once per process, by running it. Never raises."""
    path = shutil.which("env")
    if path is None:
        return ""
    try:
        done = run_child([path, "--default-signal=INT,QUIT", "true"], timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return path if done.returncode == 0 else ""


def _seconds(s: float) -> str:
    """``s`` as ``sleep`` reads it: plain decimals, never an exponent; 0 when not positive."""
    return f"{s:.3f}".rstrip("0").rstrip(".") if s > 0 else "0"


def env(job_env: dict[str, str]) -> dict[str, str]:
    """The monitor's environment: the job's, its run markers renamed (see ``SCRIPT``)."""
    out = dict(job_env)
    out["WKM_RUN"] = out.pop("WATCHKEEPER_RUN_ID", "")
    out["WKM_RUNNER"] = out.pop("WATCHKEEPER_RUNNER_ID", "")
    return out


#: Files the monitor writes its one line into over a blank line (made by ``prepare`` for the
#: sh monitor, whose ``1<>`` neither truncates nor needs a new disk block; by the C monitor
#: itself for ``exit``), so a disk that fills while the job runs still keeps the
#: pids and the exit status; on a disk already full at the start (no blank line) the monitor
#: makes each a symbolic link whose target is the number instead (no data block either).
LINE_FILES = ("monitor.pid", "job.pid", "exit")
BLANK = b" " * 23 + b"\n"


#: What an earlier start left in a run's folder that ``prepare`` removes (an old ``exit``
#: must never be read as this start's status).
_LEFTOVERS = frozenset({"timed_out", "timer.fifo", *LINE_FILES,
                        *(f"{s}.{x}" for s in STREAMS for x in ("fifo", "log", "tail", "ring", "count"))})


def prepare(art: Path) -> None:
    """Make ``art`` ready for a monitor: leftovers of an earlier start removed; for the sh
    monitor ``LINE_FILES`` blank (left empty on a full disk) and its ``FIFOS`` made. The C
    monitor makes its own files: ``monitor.pid`` before it prints the job's pid (a runner
    taking over must find it alive from then on), the rest after (each file made here, on
    the runner's way to that pid, cost a fifth of a millisecond on a slow disk). Raises
    ``OSError`` when the folder is unusable (the run cannot start) or as ``program`` does."""
    sh = program() is None
    art.mkdir(parents=True, exist_ok=True, mode=0o700)
    with os.scandir(art) as found:  # one listing instead of fourteen unlinks of absent files
        stale = [e.path for e in found if e.name in _LEFTOVERS]
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if not sh:
        return
    for name in LINE_FILES:
        fd = os.open(art / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, BLANK)
        except OSError as exc:
            # Already full: the run still starts (its capture degrades, and its monitor passes
            # the status on as its own exit status); only the blank line is missing.
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
        finally:
            os.close(fd)
    for fifo in FIFOS:
        os.mkfifo(art / fifo, 0o600)


def _first_int(path: Path) -> int | None:
    """The integer on the first line of ``path`` (or the target of ``path`` when the monitor
    made it a symbolic link on a full disk): None while it is blank (``prepare``), cut short
    (no newline yet), missing or not a number. Never raises."""
    try:
        return int(os.readlink(path))
    except (OSError, ValueError):
        pass
    try:
        text = path.read_text()
    except OSError:
        return None
    line, nl, _ = text.partition("\n")
    if not nl:
        return None
    try:
        return int(line.strip())
    except ValueError:
        return None


def monitor_pid(art: Path) -> int | None:
    """The pid in ``art/monitor.pid``, or None."""
    return _first_int(art / "monitor.pid")


def monitor_alive(art: Path) -> bool:
    """True when the monitor of folder ``art`` is still running: the pid it recorded is a live
    (non-zombie) process whose command line names this monitor (the C one's program, or the
    sh one's ``$0``) and this folder (a reused pid never matches). Never raises."""
    pid = monitor_pid(art)
    if pid is None:
        return False
    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        cmd = p.cmdline()
    except psutil.Error:
        return False
    return bool(cmd) and (NAME in cmd or os.path.basename(cmd[0]) == NAME) and str(art) in cmd


def exit_status(art: Path) -> int | None:
    """The status the monitor recorded for the job (``$?``), None while it has not (the job
    still runs, or the monitor died first). Never raises."""
    return _first_int(art / "exit")


def timed_out(art: Path) -> bool:
    """True when the job of folder ``art`` was ended at its deadline (by its monitor's
    ``TIMER`` or a runner's watchdog: ``mark_timed_out``). Never raises."""
    return os.path.lexists(art / "timed_out")


def mark_timed_out(art: Path) -> None:
    """Record that the job of folder ``art`` reached its deadline, before it is signalled, so
    whichever runner records its end (this one, or the next after a stop) says timed out.
    An empty file: only an inode, never a disk block. Never raises."""
    with contextlib.suppress(OSError):
        os.close(os.open(art / "timed_out", os.O_WRONLY | os.O_CREAT, 0o600))


def exit_time(art: Path) -> float | None:
    """When the job ended (the ``exit`` file's mtime, Unix seconds), or None."""
    try:
        return (art / "exit").lstat().st_mtime
    except OSError:
        return None


def decode_status(status: int | None) -> tuple[int | None, int | None]:
    """``(exit_code, signal)`` from a shell's ``$?``: 128 + N (N ≤ 64) is death by signal N."""
    if status is None:
        return None, None
    if 128 < status <= 128 + MAX_SIGNAL:
        return None, status - 128
    return status, None


@dataclass
class Output:
    """One stream's kept output after ``finish_output``: ``total`` bytes the job wrote (as
    counted), the first and last ``SLICE`` bytes, whether bytes were dropped."""

    total: int
    head: bytes
    tail: bytes
    truncated: bool

    def summary(self, prefix: str) -> dict[str, object]:
        """``job_outcomes`` columns for this stream (``prefix``: stdout or stderr)."""
        return {f"{prefix}_bytes": self.total, f"{prefix}_head": self.head.decode("utf-8", errors="replace"),
                f"{prefix}_tail": self.tail.decode("utf-8", errors="replace") if self.total > SLICE else None}


_BYTES = re.compile(rb"^(\d+) bytes", re.MULTILINE)


def _dd_count(path: Path) -> int:
    try:
        m = _BYTES.search(path.read_bytes())
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def marker(omitted: int) -> bytes:
    """The line put where dropped bytes were."""
    return f"\n[watchkeeper: {omitted} bytes omitted]\n".encode()


@dataclass
class _TailPart:
    """What a monitor kept of a stream past its head: ``rest`` bytes came (``STREAM.count``),
    the last ``size`` of them are in ``path`` (the C monitor's ``STREAM.ring``, the sh one's
    ``STREAM.tail``), the oldest at offset ``start`` (0 but in a ring that went round)."""

    path: Path
    rest: int
    size: int
    start: int

    def chunks(self) -> Iterator[bytes]:
        """The kept bytes in the order they came, 64 KB at a time; nothing when the file is
        gone. Reads at most ``size`` bytes (a running monitor may be writing)."""
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed below, also when abandoned
        except OSError:
            return
        with fh:
            for lo, hi in ((self.start, self.size), (0, self.start)):
                fh.seek(lo)
                while lo < hi and (chunk := fh.read(min(1 << 16, hi - lo))):
                    lo += len(chunk)
                    yield chunk


def _tail_part(art: Path, stream: str) -> _TailPart:
    ring, tail = art / f"{stream}.ring", art / f"{stream}.tail"
    rest = _dd_count(art / f"{stream}.count")
    if ring.exists() or not tail.exists():
        size = _size(ring)
        # Byte i past the head sits at offset i % size once the ring went round.
        return _TailPart(ring, rest, size, rest % size if rest > size > 0 else 0)
    return _TailPart(tail, rest, _size(tail), 0)


def finish_output(art: Path, stream: str) -> Output:
    """Fold a finished run's tail part (``STREAM.ring`` or ``STREAM.tail``) into
    ``STREAM.log`` (after an omission marker when bytes were dropped) and remove the
    monitor's working files of that stream; an empty log is removed (a silent job keeps no
    file). Idempotent: a second call finds the folded log. Never raises for missing files;
    ``OSError`` of the append propagates."""
    log, count_p = art / f"{stream}.log", art / f"{stream}.count"
    part = _tail_part(art, stream)
    head_n = _size(log)
    folded = part.path.exists() or count_p.exists()
    total = head_n + part.rest if folded else head_n
    omitted = max(0, part.rest - part.size)
    if part.size or omitted:
        with open(log, "ab") as fh:
            if omitted:
                fh.write(marker(omitted))
            for chunk in part.chunks():
                fh.write(chunk)
    for p in (art / f"{stream}.tail", art / f"{stream}.ring", count_p, art / f"{stream}.fifo", art / "timer.fifo"):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    head = tail = b""
    try:
        size = log.stat().st_size
        with open(log, "rb") as fh:
            head = fh.read(SLICE)
            if size > SLICE:
                fh.seek(max(0, size - SLICE))
                tail = fh.read(SLICE)
    except FileNotFoundError:
        size = 0
    if size == 0:
        with contextlib.suppress(FileNotFoundError):
            log.unlink()
    if not folded:  # finished before (a second call): the log holds all that was kept
        total = size
    return Output(total=total, head=head, tail=tail, truncated=omitted > 0)


def over_cap(art: Path, stream: str) -> bool:
    """True when run folder ``art`` shows ``stream`` went over its cap: bytes were counted past
    the head, or the C monitor made its ring (it does at the first byte past the head), or
    the sh monitor's tail part holds bytes or its tail drain runs while the job still does
    (no ``exit`` yet). The sh monitor's tail file alone says nothing: its drain makes it,
    empty, whenever the head part ends, at the cap or at the job's end. Never raises."""
    if _dd_count(art / f"{stream}.count") or (art / f"{stream}.ring").exists():
        return True
    tail = art / f"{stream}.tail"
    if not tail.exists():
        return False
    return bool(_size(tail)) or exit_status(art) is None


def read_output(art: Path, stream: str) -> bytes:
    """What run folder ``art`` kept of ``stream`` so far: the log, plus (while the monitor has
    not been finished) the tail part after a marker once it exists. For display; never raises."""
    try:
        data = (art / f"{stream}.log").read_bytes()
    except OSError:
        data = b""
    part = _tail_part(art, stream)
    omitted = max(0, part.rest - part.size)
    try:
        rest = b"".join(part.chunks())
    except OSError:
        rest = b""
    if omitted or rest:
        data += (marker(omitted) if omitted else b"") + rest
    return data
