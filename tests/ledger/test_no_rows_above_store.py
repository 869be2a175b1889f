"""Code above ``core.ledger`` passes typed records (``core.ledger.records``), never a row.

The rule of issue 19: no code outside ``core/ledger`` indexes a ledger row by column name
(``row["state"]``) or reaches for the driver connection (``ledger.conn``). This test reads
the source (AST, no import) and finds both shapes:

* a subscript with a string literal on a name the code uses for a ledger row (``row``,
  ``run``, ``esc``, ``m``, ``w``, ...), including ``row.get("state")``-free forms only: a
  ``.get`` on a mapping is how JSON payloads are read, and those stay dicts;
* an attribute ``.conn`` (the driver connection of a ``Ledger``).

Modules not converted yet are listed in ``NOT_YET`` with their counts (a key ending in ``/``
counts a whole package). The list may only shrink: a module that grows past its count, or
one not listed that has any, fails; lower the count in the commit that converts code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Names code above the store gives a ledger row (or a dict made from one).
ROW_NAMES = frozenset({"row", "r", "run", "job", "esc", "e", "m", "w", "rec", "mission", "worker", "outcome",
                       "o", "c", "call", "ev", "event", "escalation", "n", "item", "attempt", "cur", "d"})

#: (row subscripts, ``.conn`` uses) per module not converted yet. Shrink it; never grow it.
NOT_YET: dict[str, tuple[int, int]] = {}


def _offences(path: Path) -> tuple[int, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rows = conns = 0
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ROW_NAMES
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            rows += 1
        elif isinstance(node, ast.Attribute) and node.attr == "conn":
            conns += 1
    return rows, conns


def _modules() -> list[Path]:
    out = []
    for top in ("core", "console"):
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT)
            if rel.parts[:2] == ("core", "ledger"):
                continue
            out.append(p)
    return out


def _key(rel: str) -> str:
    """The ``NOT_YET`` key a module counts under: its package's when that is listed."""
    return next((k for k in NOT_YET if k.endswith("/") and rel.startswith(k)), rel)


def scan() -> dict[str, tuple[int, int]]:
    """``{module path or listed package: (row subscripts, .conn uses)}`` for each with any."""
    found: dict[str, tuple[int, int]] = {}
    for p in _modules():
        rows, conns = _offences(p)
        if rows or conns:
            key = _key(str(p.relative_to(ROOT)))
            had = found.get(key, (0, 0))
            found[key] = (had[0] + rows, had[1] + conns)
    return found


def test_the_scan_sees_both_shapes(tmp_path: Path) -> None:
    """The detector itself: it counts a row subscript and a ``.conn``, and not a JSON ``.get``."""
    src = tmp_path / "x.py"
    src.write_text('def f(ledger, row, payload):\n    ledger.conn.execute("x")\n    a = row["state"]\n'
                   '    b = payload["state"]\n    c = row.get("state")\n    return row[0], a, b, c\n')
    assert _offences(src) == (1, 1)


def test_no_row_subscripts_or_connections_above_the_store() -> None:
    found = scan()
    new = {k: v for k, v in found.items() if k not in NOT_YET}
    assert not new, ("index rows / use .conn above core/ledger (use a Store operation returning records): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(new.items())))
    grown = {k: (found[k], NOT_YET[k]) for k in found.keys() & NOT_YET.keys()
             if found[k][0] > NOT_YET[k][0] or found[k][1] > NOT_YET[k][1]}
    assert not grown, ("more row subscripts / .conn uses than NOT_YET allows (convert to records instead): "
                       + ", ".join(f"{k} has {got}, allowed {cap}" for k, (got, cap) in sorted(grown.items())))


@pytest.mark.parametrize("module", sorted(NOT_YET))
def test_not_yet_lists_real_modules(module: str) -> None:
    assert (ROOT / module).exists(), f"{module} is gone: remove it from NOT_YET"
