"""Nothing of a run outlives it: the runner as a child subreaper.

A job may leave its process group — ``setsid``, a double fork, a daemon that detaches — and
then neither the group kill at a timeout nor the one after the leader exits reaches it. The
runner makes itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``, through
ctypes): an orphaned descendant is re-parented to the runner instead of to init, so every
process a run started stays in the runner's own process tree, however it detached.

When a run ends, whatever the outcome (success included), ``Reaper.end_run`` looks at the
runner's descendants only (not a scan of every process's environment), keeps those whose
environment carries the run's ``WATCHKEEPER_RUN_ID`` and this runner's
``WATCHKEEPER_RUNNER_ID``, ends them (SIGTERM, SIGKILL after the job's grace) and reaps them.
The runner records them in the run's outcome (finding ``escaped_processes``) and the
supervisor escalates it as a warning. Where the kernel offers no subreaper (not Linux, or
the call fails) the environment-marker scan of every process (``core.processes.run_processes``)
stands in, as it also does at timeouts.

A run's monitor and its drains (``core.monitor``) carry ``core.monitor.MARK`` and are never
taken for strays: when the monitor was killed they are re-parented to the runner too, and
the runner waits for them and ends them itself (``core.runner.spawn.Monitored.drained``).

A stray may also have wiped its environment (``env -i setsid …``): then it carries no marker,
but it is still re-parented to the runner. A direct child of the runner without this
runner's markers that the runner did not start itself (``core.processes.is_own_child``: job
leaders, verify and notification commands are registered when started) and that was created
after a run started is taken for that run's stray when the run ends (key ``ADOPTED`` of
``tree_by_run``).

An adopted descendant that exits on its own becomes the runner's zombie; ``reap_strays``
collects those that stayed zombies since its previous call (a child the runner is waiting
for itself — a job's leader, a verify command — is reaped by its waiter at once, so a zombie
left for a whole call interval belongs to nobody else).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
import threading

import psutil

from core import monitor
from core.processes import describe, is_own_child, run_processes, stop_processes

log = logging.getLogger(__name__)

#: ``tree_by_run`` key of the runner's direct children that carry no marker of this runner:
#: candidates for strays that wiped their environment (``env -i``).
ADOPTED = ""
#: Seconds of slack on "created after the run started" (process start times are in clock ticks).
CREATED_SLACK_S = 0.1

#: ``prctl`` option number (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux). True when the kernel accepted it; False
    elsewhere or on any error (logged once), in which case the environment scan is the
    fallback. Idempotent."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_CHILD_SUBREAPER) failed (%s); escaped processes are found by a process"
                        " scan instead", os.strerror(ctypes.get_errno()))
            return False
    except (OSError, AttributeError) as exc:
        log.warning("no prctl (%s); escaped processes are found by a process scan instead", exc)
        return False
    return True


def own_children() -> list[int]:
    """Pids of this process's children, from ``/proc/self/task/*/children`` (a few small files)
    instead of psutil's ``children()``, which reads the ``stat`` file of every process on the
    machine: done every sweep pass, that scan was most of an idle runner's CPU. Falls back to
    psutil where the kernel has no such files."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    if not tasks or not os.path.exists(f"/proc/self/task/{tasks[0]}/children"):
        return [c.pid for c in psutil.Process().children()]
    pids: set[int] = set()
    for tid in tasks:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            with open(f"/proc/self/task/{tid}/children") as fh:
                pids.update(int(p) for p in fh.read().split())
    return sorted(pids)


class Reaper:
    """Finds and ends what a run left behind. One per runner; call ``start`` once in the
    runner's process (it sets the subreaper flag for the whole process).

    Args:
        runner_id: this runner's id (``runners.id``), matched against ``WATCHKEEPER_RUNNER_ID``.
    """

    def __init__(self, runner_id: str) -> None:
        self.runner_id = runner_id
        self.subreaper = False
        self._zombies: set[int] = set()
        # Unmarked strays already taken by a run (pid → create time): runs ending together
        # all see them, and one run records and ends each.
        self._claimed: dict[int, float] = {}
        self._claim_lock = threading.Lock()

    def start(self) -> bool:
        """Become the child subreaper; returns whether the kernel agreed."""
        self.subreaper = become_subreaper()
        return self.subreaper

    def tree_by_run(self) -> dict[str, list[psutil.Process]]:
        """One look at this runner's descendants, grouped by the ``WATCHKEEPER_RUN_ID`` of
        those that carry this runner's ``WATCHKEEPER_RUNNER_ID`` (zombies left out). Several
        runs that end together share one (``core.runner.strays.TreeScans``): the look costs
        a read of every process's parent pid, whatever the number of runs it serves.

        Raises ``psutil.Error`` when the tree cannot be read."""
        # psutil builds the tree from every process's parent pid. /proc/<pid>/task/*/children
        # would read only our own tree, but the kernel documents it as unreliable while
        # children are being born or re-parented — exactly when a run's strays are.
        out: dict[str, list[psutil.Process]] = {}
        me = os.getpid()
        for p in psutil.Process().children(recursive=True):
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    continue
                env = p.environ()
            except (psutil.Error, OSError):
                continue
            if monitor.MARK in env:
                # A run's monitor or one of its drains (``core.monitor``), left behind by a
                # monitor that was killed: the runner's own helper, never the job's stray.
                continue
            run = env.get("WATCHKEEPER_RUN_ID")
            if run is not None and env.get("WATCHKEEPER_RUNNER_ID") == self.runner_id:
                out.setdefault(run, []).append(p)
            elif "WATCHKEEPER_RUNNER_ID" not in env:
                try:
                    if p.ppid() == me:
                        out.setdefault(ADOPTED, []).append(p)
                except psutil.Error:
                    continue
        return out

    @staticmethod
    def adopted_since(tree: dict[str, list[psutil.Process]], since: float) -> list[psutil.Process]:
        """The unmarked direct children in ``tree`` (key ``ADOPTED``) created at or after
        ``since`` (Unix seconds) that this process did not start itself: strays that wiped
        their environment. Cheap (create times are cached by psutil); no process-table scan."""
        out = []
        for p in tree.get(ADOPTED, []):
            try:
                if p.create_time() >= since - CREATED_SLACK_S and not is_own_child(p.pid):
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def leftovers(self, run_id: int, *, exclude_pgid: int | None = None,
                  tree: dict[str, list[psutil.Process]] | None = None,
                  since: float | None = None) -> list[psutil.Process]:
        """Live processes started for run ``run_id`` by this runner that are still around:
        the runner's descendants with the run's environment markers (as subreaper; ``tree``:
        a ``tree_by_run`` taken after the run's leader exited, else one is taken now), plus,
        when ``since`` (the run's start, Unix seconds) is given, unmarked strays adopted
        since then (``adopted_since``); else a scan of every process for them.
        ``exclude_pgid``: leave out members of that process group (the run's own group,
        which its group kill ends)."""
        if not self.subreaper:
            return run_processes(run_id, runner_id=self.runner_id, exclude_pgid=exclude_pgid)
        if tree is None:
            try:
                tree = self.tree_by_run()
            except psutil.Error:
                return run_processes(run_id, runner_id=self.runner_id, exclude_pgid=exclude_pgid)
        out = []
        candidates = tree.get(str(run_id), [])
        if since is not None:
            candidates = [*candidates, *self._claim(self.adopted_since(tree, since))]
        for p in candidates:
            if exclude_pgid is not None:
                try:
                    if os.getpgid(p.pid) == exclude_pgid:
                        continue
                except OSError:
                    continue
            out.append(p)
        return out

    def _claim(self, procs: list[psutil.Process]) -> list[psutil.Process]:
        """Those of ``procs`` no other run took yet, now taken by the caller's run."""
        out = []
        with self._claim_lock:
            for p in procs:
                try:
                    ctime = p.create_time()
                except psutil.Error:
                    continue
                if self._claimed.get(p.pid) == ctime:
                    continue
                self._claimed[p.pid] = ctime
                out.append(p)
            if len(self._claimed) > 1000:  # forget those that are gone (bounded memory)
                self._claimed = {pid: t for pid, t in self._claimed.items() if psutil.pid_exists(pid)}
        return out

    def end_run(self, run_id: int, *, grace: float, exclude_pgid: int | None = None,
                tree: dict[str, list[psutil.Process]] | None = None,
                since: float | None = None) -> tuple[list[dict[str, object]], int | None]:
        """End what run ``run_id`` left behind outside its process group ``exclude_pgid``:
        SIGTERM, SIGKILL after ``grace`` seconds (at most 5), then reap those that are this
        process's children. Blocking (up to grace + 2 s when something resists): call it off
        the event loop. Returns ``([{pid, cmd}], last signal sent)`` — ``([], None)`` when the
        run left nothing. ``since``: see ``leftovers``."""
        procs = self.leftovers(run_id, exclude_pgid=exclude_pgid, tree=tree, since=since)
        if not procs:
            return [], None
        found = [describe(p) for p in procs]
        sig = stop_processes(procs, grace=min(max(0.0, grace), 5.0))
        for p in procs:
            self._reap(p.pid)
        log.warning("run %s left %d process(es) outside its process group; ended: %s", run_id, len(found),
                    ", ".join(f"pid {f['pid']}" for f in found))
        return found, sig

    def _reap(self, pid: int) -> None:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)

    def reap_strays(self) -> int:
        """Reap zombie children of this process that were already zombies at the previous
        call (adopted orphans that exited on their own). Returns how many were reaped."""
        if not self.subreaper:
            return 0
        zombies: set[int] = set()
        try:
            children = own_children()
        except psutil.Error:
            return 0
        for pid in children:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    zombies.add(pid)
        reaped = 0
        for pid in zombies & self._zombies:
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped += 1
        self._zombies = zombies - self._zombies
        return reaped
