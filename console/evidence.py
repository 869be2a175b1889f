"""The "why" of a run, for the screens: the job's most telling output lines and readable
verification / handoff fields. Pure functions over rows already read from the ledger
(``core.ledger.reads``); every string comes back sanitised (``console.safe_text``).

Until the supervisor's reason sentence carries the job's own lines everywhere, the telling
lines are the last stderr lines (else the last error-like stdout lines, else the last stdout
lines), the same choice the rules judge makes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from console.safe_text import escaped_line, output

_ERRORISH = re.compile(r"error|fail|fatal|exception|traceback|denied|refused|cannot|can't|not found|"
                       r"no such|timed? ?out|killed|panic|abort", re.IGNORECASE)


def _lines(text: str | None) -> list[str]:
    return [ln.strip() for ln in output(text or "").splitlines() if ln.strip()]


def telling_lines(stderr: str | None, stdout: str | None, n: int = 2, width: int = 160) -> list[str]:
    """At most ``n`` lines that say what happened, each cut to ``width`` cells: the last
    error-like stderr lines (error, fail, refused, traceback …), else the last stderr lines;
    else the last error-like stdout lines; else the last stdout lines. ``[]`` when the run
    printed nothing."""
    err = _lines(stderr)
    if err:
        picked = ([ln for ln in err if _ERRORISH.search(ln)] or err)[-n:]
    else:
        out = _lines(stdout)
        bad = [ln for ln in out if _ERRORISH.search(ln)]
        picked = (bad or out)[-n:]
    return [escaped_line(ln, width) for ln in picked]


def not_in(reason: str | None, lines: list[str]) -> list[str]:
    """``lines`` the reason sentence does not already quote (so nothing is said twice)."""
    text = reason or ""
    return [ln for ln in lines if ln[:40] not in text]


def is_plain_job_without_handoff(findings: Any) -> bool:
    """The only handoff finding is "missing": a plain shell job that wrote none, which is
    normal (its exit code and output are the evidence), not a problem."""
    codes = {f.get("code") for f in findings or [] if isinstance(f, dict)}
    return codes <= {"missing"}


def verification_rows(verification: Any) -> list[tuple[bool, bool, str, str]]:
    """``job_outcomes.verification`` (``{ok, checks: [{name, ok, detail, soft, path, size}]}``)
    as (ok, soft, what, found) rows, claims first: ``what`` is the check and the claimed path,
    ``found`` what the supervisor found there (size, "does not exist" …)."""
    if not isinstance(verification, dict):
        return []
    rows: list[tuple[int, bool, bool, str, str]] = []
    for c in verification.get("checks") or []:
        if not isinstance(c, dict):
            continue
        name, path, detail = str(c.get("name") or "?"), c.get("path"), str(c.get("detail") or "")
        ok, soft = bool(c.get("ok")), bool(c.get("soft"))
        if path:
            size = c.get("size")
            found = (f"{size:,} bytes" if isinstance(size, int) else "found") if ok else \
                detail.replace(f"{path}: ", "").replace(str(path), "").strip(" :") or "not found"
            rows.append((0, ok, soft, f"{name} {path}", found))
        else:
            rows.append((1, ok, soft, name, detail))
    rows.sort(key=lambda r: r[0])
    return [(ok, soft, escaped_line(what, 60), escaped_line(found, 120)) for _, ok, soft, what, found in rows]


def handoff_fields(handoff: Any) -> list[tuple[str, str]]:
    """A validated handoff (``job_outcomes.handoff``) as (field, value) rows in the order an
    operator reads them; lists become counts plus the first items; ``result`` becomes compact
    JSON cut to one line."""
    if not isinstance(handoff, dict):
        return []
    out: list[tuple[str, str]] = []

    def add(key: str, value: Any) -> None:
        if value in (None, "", [], {}):
            return
        if isinstance(value, list):
            items = [json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v for v in value]
            text = f"{len(items)}: " + ", ".join(items[:5]) + (" …" if len(items) > 5 else "")
        elif isinstance(value, dict | bool) or (key == "result" and not isinstance(value, str)):
            text = json.dumps(value, ensure_ascii=False, default=str)
        else:
            text = str(value)
        out.append((key, escaped_line(text, 200)))

    for key in ("status", "error", "result", "confidence", "steps_used", "exit_state", "blockers", "notes"):
        add(key, handoff.get(key))
    cmds = handoff.get("commands") or []
    if isinstance(cmds, list) and cmds:
        shown = [f"{c.get('cmd')} → {c.get('exit_code')}" for c in cmds[:5] if isinstance(c, dict)]
        add("commands", shown + (["…"] if len(cmds) > 5 else []))
    for key in ("files_changed", "artifacts"):
        add(key, handoff.get(key))
    return out
