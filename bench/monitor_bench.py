"""What a run's per-run monitor (``core.monitor``) costs: spawn time, memory, and 500 of them,
for both monitors in the same run: the C one (``watchkeeper-monitor``, one process per run)
and the sh one it falls back to (``SCRIPT``: the monitor, two drains with ``head``/``dd``/
``tail``, a deadline keeper with ``timeout``/``head``).

Issue 18's goal: at most about 1 MB of RSS and 2 ms of spawn time per run, and 500 concurrent
runs affordable. Every figure has a baseline measured in the same process and window, so a
busy host (a shared 2-core CI box) is judged against itself. The jobs are started as the
runner starts a job with the defaults (``RUN``: 1 h timeout, so the sh monitor also runs its
deadline keeper, ``core.monitor.TIMER``). The monitor is picked per spawn through
``core.monitor.CHOICE``.

* **Spawn time per run** (median and p95 of ``--samples``, default 200; ``--quick`` 60):
  ``core.runner.spawn.start_monitored`` until the job's pid is known (what the runner waits
  for before it records ``running``), against a bare ``subprocess.Popen(["true"])`` (the
  cheapest start of any process) and a bare ``sh -c 'echo $$'`` read back (the floor of any
  ``sh`` monitor: one shell started and heard from). All four are interleaved sample by
  sample, so load changes hit them alike. Also the runner's own CPU per spawn (this
  process's CPU time, the part that competes with its event loop) and the host's CPU per
  monitored run (monitor, its helpers and job, counted when they are reaped).
* **Memory per run**: the monitor and its helpers (every process but the job) while the job
  runs: RSS summed over the processes as psutil reports it (shared pages of ``sh`` and libc
  counted again in every process), PSS (shared pages split between their users: the share of
  the host's memory a run takes) and USS (pages only the run has).
* **500 concurrent runs** (``--quick``: 100), per monitor: 500 ``sleep`` jobs started at once,
  each under its monitor, the way the runner starts them (one task per run on one event
  loop): spawn wall time until every job's pid is known, against 500 bare
  ``Popen(["sleep", …])`` in a loop; the monitors' total RSS and PSS; this process's CPU over
  5 s while it waits on all 500 jobs as the runner does (one pidfd per job on its loop). The
  real runner's CPU with 500 live runs is the ``scale`` benchmark's.

    python -m bench.monitor_bench [--quick] [--json]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from bench.common import Figure, bench_main

SPAWN_GOAL_MS = 2.0
MEMORY_GOAL_MB = 1.0
CONCURRENT = 500
WINDOW_S = 5.0
#: What the runner passes for a job with the defaults: 1 MB output cap, 1 h timeout (so the
#: monitor's deadline keeper runs too), 10 s grace.
RUN = {"cap": 1 << 20, "timeout": 3600.0, "grace": 10.0}
#: The spawn threads a runner has (``core.runner.spawn.spawn_pool``'s size).
POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bench-spawn")


def _p95(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.95))]


def _family(mon_pid: int, job_pid: int) -> list[psutil.Process]:
    """A run's monitor, its drains and deadline keeper (every descendant but the job's own
    process)."""
    try:
        top = psutil.Process(mon_pid)
        return [top, *(p for p in top.children(recursive=True) if p.pid != job_pid)]
    except psutil.Error:
        return []


def _memory(mons: list) -> tuple[float, float, float]:
    """(RSS, PSS, USS) in MB summed over the monitors of ``mons`` and their helpers."""
    rss = pss = uss = 0
    for m in mons:
        for p in _family(m.monitor, m.pid):
            try:
                info = p.memory_full_info()
            except psutil.Error:
                continue
            rss, pss, uss = rss + info.rss, pss + info.pss, uss + info.uss
    return rss / 1e6, pss / 1e6, uss / 1e6


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


async def _end(mons: list) -> None:
    for m in mons:
        m.kill()
    for m in mons:
        await m.drained(30)


@contextlib.contextmanager
def _monitor(kind: str) -> Iterator[None]:
    """Spawns in the block use the ``kind`` monitor ("c" or "sh")."""
    from core import monitor

    old = os.environ.get(monitor.CHOICE)
    os.environ[monitor.CHOICE] = kind
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(monitor.CHOICE, None)
        else:
            os.environ[monitor.CHOICE] = old


async def _sequential(folder: Path, samples: int, kinds: list[str]) -> dict[str, list[float]]:
    """Interleaved samples (ms) of the bare spawns and of each monitor's, plus CPU per spawn."""
    from core.runner import spawn

    out: dict[str, list[float]] = {k: [] for k in ("true", "bare_sh", "true_cpu")}
    for k in kinds:
        out.update({k: [], f"{k}_cpu": [], f"{k}_busy": [], f"{k}_alone": []})
    env = dict(os.environ)
    host_cpu = dict.fromkeys(kinds, 0.0)
    # The loop's busy time (not waiting in select): how long a spawn holds up everything else
    # the runner's loop does. Read through the selector (private to asyncio; a bench only).
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    plain_select = selector.select
    waited = [0.0]

    def timed_select(timeout: float | None = None) -> list:
        t = time.perf_counter()
        try:
            return plain_select(timeout)
        finally:
            waited[0] += time.perf_counter() - t
    selector.select = timed_select
    for i in range(samples):
        c0, t0 = time.process_time(), time.perf_counter()
        p = subprocess.Popen(["true"])
        out["true"].append((time.perf_counter() - t0) * 1000)
        out["true_cpu"].append((time.process_time() - c0) * 1000)
        p.wait()

        t0 = time.perf_counter()
        p = subprocess.Popen(["sh", "-c", "echo $$"], stdout=subprocess.PIPE)
        assert p.stdout is not None
        p.stdout.readline()
        out["bare_sh"].append((time.perf_counter() - t0) * 1000)
        p.wait()
        p.stdout.close()

        for k in kinds:
            with _monitor(k):
                h0 = _children_cpu()
                c0, t0, w0 = time.process_time(), time.perf_counter(), waited[0]
                mon = await spawn.start_monitored(POOL, ["sleep", "600"], cwd=None, env=env, art=folder / f"s{k}{i}", **RUN)
                out[k].append((time.perf_counter() - t0) * 1000)
                out[f"{k}_cpu"].append((time.process_time() - c0) * 1000)
                out[f"{k}_busy"].append((time.perf_counter() - t0 - (waited[0] - w0)) * 1000)
                await _end([mon])
                host_cpu[k] += _children_cpu() - h0
                out[f"{k}_alone"].append(_alone(folder / f"a{k}{i}", env))
    selector.select = plain_select
    for k in kinds:
        out[f"{k}_host_cpu"] = [host_cpu[k] * 1000 / samples]
    return out


def _alone(art: Path, env: dict[str, str]) -> float:
    """The monitor alone (ms): ``Popen`` of the monitor in a session of its own until its pid
    line is read, as the runner starts it but without the spawn thread and the event loop."""
    from core import monitor

    monitor.prepare(art)
    t0 = time.perf_counter()
    p = subprocess.Popen(monitor.argv(art, RUN["cap"], ["sleep", "600"], timeout=RUN["timeout"], grace=RUN["grace"]),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                         env=monitor.env(env))
    assert p.stdout is not None
    job = int(p.stdout.readline())
    took = (time.perf_counter() - t0) * 1000
    try:
        os.killpg(job, signal.SIGKILL)
    except ProcessLookupError:  # the sh monitor's job before its setsid
        os.kill(job, signal.SIGKILL)
    p.wait()
    p.stdout.close()
    return took


async def _concurrent(folder: Path, n: int, kind: str) -> dict[str, float]:
    from core.runner import spawn

    env = dict(os.environ)
    t0 = time.perf_counter()
    with _monitor(kind):
        mons = await asyncio.gather(*(spawn.start_monitored(POOL, ["sleep", "600"], cwd=None, env=env,
                                                            art=folder / f"c{kind}{i}", **RUN) for i in range(n)))
    wall = time.perf_counter() - t0
    try:
        # Every monitor is set up (each has opened its logs: the sh one's drains) before memory
        # is looked at.
        deadline = time.monotonic() + 60
        while not all((m.art / "stderr.log").exists() for m in mons) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        alive = sum(psutil.pid_exists(m.pid) for m in mons)
        assert alive == n, f"only {alive} of {n} jobs running"
        rss, pss, uss = _memory(mons)
        procs = sum(len(_family(m.monitor, m.pid)) for m in mons)
        waits = [asyncio.ensure_future(m.job_exit()) for m in mons]
        await asyncio.sleep(0.5)
        c0, t1 = time.process_time(), time.perf_counter()
        await asyncio.sleep(WINDOW_S)
        cpu = (time.process_time() - c0) / (time.perf_counter() - t1) * 100
    finally:
        await _end(mons)
    await asyncio.gather(*waits)
    t0 = time.perf_counter()
    bare = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(n)]
    bare_wall = time.perf_counter() - t0
    for p in bare:
        p.kill()
    for p in bare:
        p.wait()
    return {"wall_s": wall, "bare_wall_s": bare_wall, "rss_mb": rss, "pss_mb": pss, "uss_mb": uss, "cpu": cpu,
            "procs": procs / n}


#: How each monitor is named in the figures.
LABEL = {"c": "C monitor", "sh": "sh monitor"}


def _kinds() -> list[str]:
    """The monitors to measure: both, or the sh one alone where no C binary was built."""
    from core import monitor

    return ["c", "sh"] if monitor._program("") is not None else ["sh"]


def _figures(kind: str, seq: dict[str, list[float]], con: dict[str, float], n: int, samples: int) -> list[Figure]:
    med = {k: statistics.median(v) for k, v in seq.items()}
    p95 = {k: _p95(v) for k, v in seq.items()}
    m = LABEL[kind]
    where = f"{samples} samples interleaved with the baselines"
    return [
        Figure(f"{m}: spawn time per run, median (until the job's pid is known)", med[kind], "ms",
               med["bare_sh"], "bare sh -c 'echo $$' read back", med["bare_sh"] / med[kind], f"≤ {SPAWN_GOAL_MS:g} ms",
               med[kind] <= SPAWN_GOAL_MS, f"{where}; bare Popen(['true']) median {med['true']:.2f} ms"),
        Figure(f"{m} alone: Popen until its pid line, median", med[f"{kind}_alone"], "ms", med["bare_sh"],
               "bare sh -c 'echo $$' read back", med["bare_sh"] / med[f"{kind}_alone"], f"≤ {SPAWN_GOAL_MS:g} ms",
               med[f"{kind}_alone"] <= SPAWN_GOAL_MS, f"p95 {p95[f'{kind}_alone']:.2f} ms: what the monitor itself"
               " costs, without the runner's spawn thread, folder set-up and event loop"),
        Figure(f"{m}: spawn time per run, p95", p95[kind], "ms", p95["bare_sh"], "bare sh -c 'echo $$' read back",
               p95["bare_sh"] / p95[kind], "≤ 2× the bare sh p95", p95[kind] <= 2 * p95["bare_sh"],
               f"bare Popen(['true']) p95 {p95['true']:.2f} ms"),
        Figure(f"{m}: spawn vs the bare sh floor, median", med[kind] - med["bare_sh"], "ms", None,
               "monitor median − bare sh median", None, f"≤ {SPAWN_GOAL_MS:g} ms over the floor",
               med[kind] - med["bare_sh"] <= SPAWN_GOAL_MS, "what the monitor adds to one shell's start"),
        Figure(f"{m}: runner CPU per spawn (this process)", med[f"{kind}_cpu"], "ms", med["true_cpu"],
               "bare Popen(['true'])", med["true_cpu"] / med[f"{kind}_cpu"] if med[f"{kind}_cpu"] else None,
               f"≤ {SPAWN_GOAL_MS:g} ms", med[f"{kind}_cpu"] <= SPAWN_GOAL_MS, "median; its event loop's share"),
        Figure(f"{m}: event loop held per spawn", med[f"{kind}_busy"], "ms", med["true"], "one bare Popen(['true'])",
               med["true"] / med[f"{kind}_busy"] if med[f"{kind}_busy"] else None, f"≤ {SPAWN_GOAL_MS:g} ms",
               med[f"{kind}_busy"] <= SPAWN_GOAL_MS, f"median, p95 {p95[f'{kind}_busy']:.2f} ms: the loop's time"
               " outside select during start_monitored (the start itself runs in a spawn thread)"),
        Figure(f"{m}: host CPU per monitored run (monitor, helpers, job)", seq[f"{kind}_host_cpu"][0], "ms",
               note="mean, counted when reaped; the job here is `sleep`"),
        Figure(f"{m}: {n} concurrent runs, spawn wall time per run", con["wall_s"] * 1000 / n, "ms",
               con["bare_wall_s"] * 1000 / n, f"{n} bare Popen(['sleep']) in a loop",
               con["bare_wall_s"] / con["wall_s"], f"≤ {SPAWN_GOAL_MS:g} ms", con["wall_s"] * 1000 / n <= SPAWN_GOAL_MS,
               f"{n} started at once on one loop: all pids known after {con['wall_s']:.2f} s"),
        Figure(f"{m}: RSS per run (summed over its processes)", con["rss_mb"] / n, "MB",
               goal=f"≤ about {MEMORY_GOAL_MB:g} MB", met=con["rss_mb"] / n <= MEMORY_GOAL_MB,
               note=f"{n} runs: {con['rss_mb']:.0f} MB in total, {con['procs']:g} process(es) per run besides"
               " the job; shared pages (libc, sh, the binary) counted in every process"),
        Figure(f"{m}: PSS per run (its share of the host's memory)", con["pss_mb"] / n, "MB",
               goal=f"≤ {MEMORY_GOAL_MB:g} MB", met=con["pss_mb"] / n <= MEMORY_GOAL_MB,
               note=f"{n} runs: {con['pss_mb']:.0f} MB in total; USS {con['uss_mb'] / n:.2f} MB per run"),
        Figure(f"{m}: this process's CPU while {n} monitored jobs run", con["cpu"], "% core",
               note=f"{WINDOW_S:g} s window, one pidfd wait per job on the loop (the runner's own: bench `scale`)"),
    ]


def run(quick: bool = False, samples: int | None = None) -> list[Figure]:
    samples = samples or (60 if quick else 200)
    n = 100 if quick else CONCURRENT
    kinds = _kinds()
    with tempfile.TemporaryDirectory(prefix="wk-bench-monitor-") as tmp:
        seq = asyncio.run(_sequential(Path(tmp), samples, kinds))
        con = {k: asyncio.run(_concurrent(Path(tmp), n, k)) for k in kinds}
    figs = [f for k in kinds for f in _figures(k, seq, con[k], n, samples)]
    if "c" in kinds:  # the C monitor against the sh one, measured side by side
        c, s = statistics.median(seq["c"]), statistics.median(seq["sh"])
        ca, sa = statistics.median(seq["c_alone"]), statistics.median(seq["sh_alone"])
        figs += [
            Figure("C vs sh monitor alone: Popen until its pid line, median", ca, "ms", sa,
                   "the sh monitor, same samples", sa / ca, "below the sh monitor's", ca < sa),
            Figure("C vs sh monitor: spawn time per run, median", c, "ms", s, "the sh monitor, same samples",
                   s / c, "below the sh monitor's", c < s),
            Figure("C vs sh monitor: RSS per run", con["c"]["rss_mb"] / n, "MB", con["sh"]["rss_mb"] / n,
                   "the sh monitor, same host", con["sh"]["rss_mb"] / con["c"]["rss_mb"], "below the sh monitor's",
                   con["c"]["rss_mb"] < con["sh"]["rss_mb"]),
            Figure("C vs sh monitor: PSS per run", con["c"]["pss_mb"] / n, "MB", con["sh"]["pss_mb"] / n,
                   "the sh monitor, same host", con["sh"]["pss_mb"] / con["c"]["pss_mb"], "below the sh monitor's",
                   con["c"]["pss_mb"] < con["sh"]["pss_mb"]),
        ]
    else:
        figs.append(Figure("C monitor: not measured", None, "", note="no watchkeeper-monitor binary (no C compiler)"))
    return figs


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.monitor_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())

