"""The HTML part of a notification e-mail: a small readable layout built from a payload's
structured fields (``core.ledger.outbox.payload_for``), for sinks whose service sends HTML.

Apprise turns plain text into HTML by replacing every space with ``&nbsp;``, which mail
readers show as one unbroken blob; this layout keeps output lines in ``<pre>`` blocks and the
facts in a table instead. Inline styles only (mail clients drop ``<style>``). Every string
from the payload was escaped for control characters when the payload was made and is
HTML-escaped here, so job output can never add markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

_SEVERITY_COLOURS = {"critical": "#b3261e", "warning": "#8a5a00", "info": "#37474f"}
_PRE = ("margin:4px 0 12px;padding:8px 10px;background:#f5f5f5;border-left:3px solid #ccc;"
        "font:13px/1.4 monospace;white-space:pre-wrap;word-break:break-word")
_FACT = "margin:2px 0"
_MONO = "font:13px monospace"  # not <code>: Apprise's plain-text part puts a <code> on its own line


def _pre(lines: Sequence[str]) -> str:
    # <br> between lines, not newlines: Apprise's plain-text part collapses whitespace even
    # inside <pre> but keeps <br> as a line break.
    return f'<pre style="{_PRE}">' + "<br>".join(escape(ln) for ln in lines) + "</pre>"


def _one(p: Mapping[str, Any]) -> str:
    """One notification: heading sentence, why, output blocks, facts table."""
    colour = _SEVERITY_COLOURS.get(str(p.get("severity") or "info"), "#37474f")
    if p.get("event") == "recovered":
        colour = "#1b5e20"
    parts = [f'<h2 style="margin:0 0 8px;font-size:16px;color:{colour}">{escape(str(p.get("title") or ""))}</h2>']
    if p.get("reason") and p.get("event") != "recovered":
        parts.append(f'<p style="margin:0 0 12px">{escape(str(p["reason"]))}</p>')
    if "stdout" not in p and "stderr" not in p:  # a row queued by an older version: its text body
        return "".join(parts) + _pre(str(p.get("body") or p.get("text") or "").splitlines())
    for stream in ("stdout", "stderr"):
        lines = p.get(stream) or []
        if lines and p.get("event") != "recovered":
            parts.append(f'<div style="font-weight:bold;margin-top:8px">Output ({stream}, last lines)</div>')
            parts.append(_pre([str(ln) for ln in lines]))
    facts = [("Host", p.get("host")),
             ("Escalation", None if p.get("escalation_id") is None else
              f"{p.get('escalation_id')} ({p.get('kind')}, count {p.get('count')}, owner {p.get('owner') or 'unowned'})"),
             ("Run", p.get("run_id"))]
    # One <div> per fact, not a table: Apprise's plain-text part (made from this HTML) then
    # reads "Host: db1" on one line instead of a cell per line.
    lines = [f'<div style="{_FACT}"><span style="color:#666">{escape(k)}:</span> {escape(str(v))}</div>'
             for k, v in facts if v is not None]
    if p.get("open_command"):
        lines.append(f'<div style="{_FACT}"><span style="color:#666">Open it:</span> '
                     f'<span style="{_MONO}">{escape(str(p["open_command"]))}</span></div>')
    parts.append('<div style="margin-top:8px">' + "".join(lines) + "</div>")
    return "".join(parts)


def render(payload: Mapping[str, Any]) -> str:
    """The HTML document for ``payload`` (one notification, or a grouped one whose
    ``notifications`` each get their own section under the group's title)."""
    style = "font-family:Arial,Helvetica,sans-serif;font-size:14px;color:#212121;max-width:760px"
    members = payload.get("notifications")
    if isinstance(members, list) and members:
        sections = "<hr style=\"border:0;border-top:1px solid #ddd;margin:16px 0\">".join(_one(m) for m in members)
        inner = (f'<h1 style="margin:0 0 12px;font-size:18px">{escape(str(payload.get("title") or ""))}</h1>'
                 + sections)
    else:
        inner = _one(payload)
    return f'<html><body><div style="{style}">{inner}</div></body></html>'
