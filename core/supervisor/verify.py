"""Verification: the supervisor checks a worker's evidence itself before a run may succeed.

A worker hands back evidence, never authority (docs/architecture.md: rule 2, and "The
handoff"). ``verify_outcome`` takes the ``job_outcomes`` record the runner wrote, the run row
and the job's spec, and checks:

* the handoff is valid (runner's ``handoff_findings``; ``missing`` is fine for a plain job),
* exit code and handoff ``status`` agree (0 with ``failed`` or non-zero with ``success`` is a
  mismatch),
* every ``files_changed`` path exists, is no symlink, lies inside an allowed root and was
  modified during the run (mtime ≥ ``runs.started_at`` minus a small clock-granularity slack),
* every ``artifacts`` path exists (relative to the job's cwd or the run's artifacts folder),
* every ``expect.files`` path exists,
* every spec ``verify`` command exits 0 within its timeout (whole process group killed on
  timeout),
* ``expect.output`` matches stdout head + tail. A mismatch is recorded but does not fail
  verification: it is a soft anomaly the judge reports (policy table in docs/supervisor.md).
  The match runs with the ``regex`` package, bounded by ``OUTPUT_MATCH_TIMEOUT_S`` and with
  the GIL released: the pattern is the operator's, but the output is the job's, and a
  catastrophic backtrack must not freeze the runner's other threads.

Nothing here raises for bad evidence: each problem is a failed check with a one-line detail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import regex

from core.ledger.records import Outcome, Run
from core.processes import forget_child, signal_group, start_child
from core.spec.model import JobSpec
from core.text import cut
from core.vocabulary import OutcomeStatus

#: Seconds of slack on the mtime check: coarse filesystem timestamps (1 s on some) and a
#: run start recorded a moment after the worker really began writing.
MTIME_SLACK_S = 1.0
#: Handoff finding codes that are not failures: a plain shell job writes no handoff.
#: ``capture_degraded`` is the runner's problem (its disk filled), not evidence against the
#: job: the run is still judged on its exit status and handoff.
BENIGN_FINDINGS = frozenset({"missing", "capture_degraded", "escaped_processes", "left_in_group"})
#: Characters of verify-command output kept in the check detail.
VERIFY_OUTPUT_KEEP = 400
#: Seconds between two asks whether a verify command's run is still wanted (``stop_when``).
STOP_POLL_S = 0.5
#: Seconds one ``expect.output`` match may take on a run's output. A sane pattern takes
#: milliseconds on the captured head + tail; a backtracking one can take hours.
OUTPUT_MATCH_TIMEOUT_S = 2.0


@dataclass
class Check:
    """One verification check. ``soft`` checks never fail verification."""

    name: str
    ok: bool
    detail: str = ""
    soft: bool = False
    #: File checks only: the path as claimed/declared and its size in bytes (None: missing).
    #: The sizes are the evidence the judge learns file baselines from.
    path: str | None = None
    size: int | None = None
    #: A verify command marked ``deterministic`` in the spec: it fails the same way on a retry.
    deterministic: bool = False


@dataclass
class Verification:
    """All checks of one run. ``ok`` is False when any non-soft check failed."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if not c.soft)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok and not c.soft]

    def add(self, name: str, ok: bool, detail: str = "", soft: bool = False, *, path: str | None = None,
            size: int | None = None, deterministic: bool = False) -> None:
        self.checks.append(Check(name, ok, detail, soft, path, size, deterministic))

    def to_json(self) -> dict[str, Any]:
        """``{ok, checks: [{name, ok, detail, soft, path, size, deterministic}], failed: [names]}`` for
        ``job_outcomes.verification`` (``path``/``size`` set on file checks; size in bytes)."""
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks],
                "failed": [c.name for c in self.failed]}


def _loads(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def _within(path: Path, roots: list[Path]) -> bool:
    for root in roots:
        try:
            path.relative_to(root)
            return True
        except ValueError:
            continue
    return False


def _resolve(raw: str, cwd: Path) -> Path:
    p = Path(raw)
    return p if p.is_absolute() else cwd / p


def _path_check(vf: Verification, name: str, raw: Any, cwd: Path, roots: list[Path],
                *, since: float | None, alt_base: Path | None = None, soft: bool = False) -> None:
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        vf.add(name, False, f"{raw!r}: not a path", soft)
        return
    p = _resolve(raw, cwd)
    if not p.exists() and not p.is_symlink() and alt_base is not None and not Path(raw).is_absolute():
        p = alt_base / raw
    if p.is_symlink():
        vf.add(name, False, f"{raw}: is a symlink (not trusted as evidence)", soft, path=raw)
        return
    # normpath, not resolve(): a symlinked parent folder must not smuggle a path inside.
    norm = Path(os.path.normpath(p))
    if not _within(norm, roots):
        vf.add(name, False, f"{raw}: outside the allowed roots ({', '.join(str(r) for r in roots)})", soft,
               path=raw)
        return
    try:
        st = norm.stat()
    except OSError:
        vf.add(name, False, f"{raw}: does not exist", soft, path=raw)
        return
    if since is not None and st.st_mtime < since - MTIME_SLACK_S:
        vf.add(name, False, f"{raw}: not modified during the run (mtime {st.st_mtime:.3f} < start {since:.3f})",
               soft, path=raw, size=st.st_size)
        return
    vf.add(name, True, f"{raw} ({st.st_size} bytes)", soft, path=raw, size=st.st_size)


def run_verify_command(argv: list[str], cwd: Path, timeout: float, env: dict[str, str],
                       *, stop_when: Callable[[], bool] | None = None) -> tuple[bool, str]:
    """Run one verify command; returns ``(passed, detail)``. Timeout (seconds) kills its
    process group. ``stop_when``: asked every ``STOP_POLL_S`` seconds while the command runs;
    True kills its process group at once (the run was abandoned meanwhile: nobody wants the
    answer, and the command must not run on for nobody).

    Never raises: a command that cannot start is a failed check.
    """
    try:
        proc = start_child(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return False, f"cannot start: {exc}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                out, _ = proc.communicate(timeout=max(0.0, min(left, STOP_POLL_S) if stop_when else left))
                break
            except subprocess.TimeoutExpired:
                # communicate may be called again after a timeout without losing output.
                if time.monotonic() >= deadline:
                    signal_group(proc.pid, signal.SIGKILL)  # its own session: the whole group goes
                    proc.communicate()
                    return False, f"timed out after {timeout:g}s"
                if stop_when is not None and stop_when():
                    signal_group(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    return False, "stopped: the run was settled elsewhere (abandoned) while this ran"
    finally:
        forget_child(proc.pid)
    text = out.decode("utf-8", "replace").strip()[-VERIFY_OUTPUT_KEEP:]
    if proc.returncode != 0:
        return False, f"exit {proc.returncode}" + (f": {text}" if text else "")
    return True, "exit 0"


def match_output(pattern: str, text: str, timeout: float | None = None) -> tuple[bool, str]:
    """Search ``text`` for ``pattern`` (MULTILINE); returns ``(matched, detail)``.

    ``timeout`` is seconds (default ``OUTPUT_MATCH_TIMEOUT_S``). Never raises: a match that
    runs out of time, or a pattern that no longer compiles (a spec stored by another
    version), is ``False`` with a detail saying so — never silently a match.
    """
    limit = OUTPUT_MATCH_TIMEOUT_S if timeout is None else timeout
    try:
        # concurrent=True releases the GIL while matching, so heartbeats and other jobs run on.
        found = regex.search(pattern, text, regex.MULTILINE, timeout=limit, concurrent=True)
    except TimeoutError:
        return False, f"expect.output: pattern took longer than {limit:g} s on the output; treated as not matching"
    except regex.error as exc:
        return False, f"expect.output: invalid regex ({exc}); treated as not matching"
    matched = found is not None
    return matched, f"stdout {'matches' if matched else 'does not match'} /{pattern}/"


def verify_outcome(outcome: Outcome | None, run: Run, spec: JobSpec, cwd: str | os.PathLike[str],
                   *, exit_code: int | None = None, run_commands: bool = True,
                   stop_when: Callable[[], bool] | None = None) -> Verification:
    """Check one run's evidence (see module docstring).

    Args:
        outcome: the run's outcome record (None: no evidence recorded yet).
        run: the run record (``started_at``, ``artifacts_dir``, ``id``, ``attempt``).
        exit_code: the exit code the run ended with (the outcome's, else the run's).
        spec: the job's spec (``jobs.spec``).
        cwd: the job's working directory: relative paths and verify commands use it.
        run_commands: False skips the spec's ``verify`` commands (used for runs that already
            failed by exit code, where they prove nothing).
        stop_when: passed to ``run_verify_command``: True once the run no longer needs
            verifying (abandoned meanwhile); its running verify command is killed and the
            rest are not started.

    Returns:
        A ``Verification``; never raises for bad evidence.
    """
    vf = Verification()
    base = Path(cwd)
    art = Path(run.artifacts_dir) if run.artifacts_dir else None
    roots = [Path(os.path.normpath(base))]
    if art is not None:
        roots.append(Path(os.path.normpath(art)))
    for f in [*spec.expect.files, *spec.expect.min_bytes]:
        roots.append(Path(os.path.normpath(_resolve(f, base))).parent)
    started = run.started_at

    findings = _loads(outcome.handoff_findings if outcome is not None else None) or []
    bad = [f for f in findings if isinstance(f, dict) and f.get("code") not in BENIGN_FINDINGS]
    if bad:
        vf.add("handoff_valid", False, "; ".join(cut(f"{f.get('code')}: {f.get('message', '')}", 200) for f in bad))
    handoff = _loads(outcome.handoff if outcome is not None else None)
    if not isinstance(handoff, dict):
        handoff = None
    if handoff is not None and handoff.get("status") in (OutcomeStatus.SUCCESS, OutcomeStatus.FAILED, OutcomeStatus.PARTIAL):
        status = handoff["status"]
        if exit_code == 0 and status == OutcomeStatus.FAILED:
            vf.add("exit_status_agree", False, "exit 0 but handoff status 'failed'")
        elif exit_code not in (0, None) and status == OutcomeStatus.SUCCESS:
            vf.add("exit_status_agree", False, f"exit {exit_code} but handoff status 'success'")
        else:
            vf.add("exit_status_agree", True, f"exit {exit_code}, status {status}")

    if handoff is not None:
        for raw in handoff.get("files_changed") or []:
            _path_check(vf, "file_changed", raw, base, roots, since=started)
        for raw in handoff.get("artifacts") or []:
            _path_check(vf, "artifact", raw, base, roots, since=None, alt_base=art)
    for raw in spec.expect.files:
        _path_check(vf, "expect_file", raw, base, roots, since=None)
    for raw in spec.expect.min_bytes:
        if raw not in spec.expect.files:  # measured only: the judge compares the size (small_file)
            _path_check(vf, "expect_file", raw, base, roots, since=None, soft=True)

    if spec.expect.output is not None:
        head, tail = (outcome.stdout_head, outcome.stdout_tail) if outcome is not None else (None, None)
        text = (head or "") + "\n" + (tail or "")
        matched, detail = match_output(spec.expect.output, text)
        vf.add("expect_output", matched, detail, soft=True)

    if run_commands and spec.verify:
        env = {**os.environ, **spec.env, "WATCHKEEPER_RUN_ID": str(run.id),
               "WATCHKEEPER_ATTEMPT": str(run.attempt)}
        if art is not None:
            env["WATCHKEEPER_ARTIFACTS"] = str(art)
        for vc in spec.verify:
            if stop_when is not None and stop_when():
                break
            argv = spec.argv(vc.command)
            t0 = time.monotonic()
            ok, detail = run_verify_command(argv, base, vc.timeout, env, stop_when=stop_when)
            cmd = vc.command if isinstance(vc.command, str) else " ".join(vc.command)
            vf.add("verify_command", ok, f"{cut(cmd, 120)}: {detail} ({time.monotonic() - t0:.1f}s)",
                   deterministic=vc.deterministic)
    return vf
