"""A reason is a closed code plus a sentence for people; code never parses the sentence.

Why a run ended is ``runs.reason_code`` (``core.vocabulary.EndReason``); ``runs.reason``,
``job_outcomes.reason``, ``verdict_reason`` and an escalation's ``reason`` are sentences. This
test reads every module of ``core/`` and ``console/`` and fails on code that takes such a
sentence apart: a prefix or suffix test, a substring test, a split, a regular expression over
it. Showing a sentence, cutting it to a width or collapsing its whitespace is not parsing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: String methods that read a sentence's parts.
PARSING_METHODS = frozenset({"startswith", "endswith", "removeprefix", "removesuffix", "partition",
                             "rpartition", "find", "rfind", "index", "rindex", "count"})
REGEX_FUNCTIONS = frozenset({"match", "search", "fullmatch", "findall", "finditer", "split", "sub"})


def _is_reason_name(name: str) -> bool:
    """``reason``, ``run_reason``, ``verdict_reason``, ``stop_reason`` ...: a sentence (never
    ``reason_code``, the closed code, which code is meant to compare)."""
    return (name == "reason" or name.endswith("_reason")) and not name.endswith("_code")


def _mentions_reason(node: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` reads a reason sentence: a name, an attribute, a subscript or a
    ``.get()`` naming one, possibly inside ``str()``/``or ""``/parentheses, or a local name
    in ``aliases`` (assigned from one: ``r = f.run_reason or ""``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and (_is_reason_name(sub.id) or sub.id in aliases):
            return True
        if isinstance(sub, ast.Attribute) and _is_reason_name(sub.attr):
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _is_reason_name(sub.value):
            return True  # a "reason" key: row["reason"], esc.get("reason")
    return False


def _is_sentence_value(value: ast.AST) -> bool:
    """An expression that *is* a reason sentence (``f.run_reason or ""``, ``row["reason"]``,
    ``str(esc.get("reason"))``), not one that merely passes a reason along (a call with a
    ``reason=`` argument)."""
    if isinstance(value, ast.BoolOp):
        return any(_is_sentence_value(v) for v in value.values)
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Name) and f.id == "str":
            return any(_is_sentence_value(a) for a in value.args)
        return isinstance(f, ast.Attribute) and f.attr == "get" and _mentions_reason(value)
    return isinstance(value, ast.Name | ast.Attribute | ast.Subscript) and _mentions_reason(value)


def parsing_sites(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every place in ``source`` that parses a reason sentence."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    # Names bound to a sentence anywhere in the module (``r = f.run_reason or f.reason``).
    aliases = frozenset(t.id for node in ast.walk(tree)
                        if isinstance(node, ast.Assign) and _is_sentence_value(node.value)
                        for t in node.targets if isinstance(t, ast.Name))

    def _mentions(n: ast.AST) -> bool:
        return _mentions_reason(n, aliases)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr in PARSING_METHODS and _mentions(node.func.value):
                found.append((node.lineno, f".{attr}() on a reason"))
            elif attr == "split" and node.args and _mentions(node.func.value):
                found.append((node.lineno, ".split(sep) on a reason"))
            elif (attr in REGEX_FUNCTIONS and isinstance(node.func.value, ast.Name)
                  and node.func.value.id in ("re", "regex") and any(_mentions(a) for a in node.args[1:])):
                found.append((node.lineno, f"re.{attr}() over a reason"))
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn) and _mentions(right) and \
                        isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                    found.append((node.lineno, "substring test on a reason"))
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(p for pkg in ("core", "console") for p in (ROOT / pkg).rglob("*.py"))


def test_the_check_finds_each_way_of_parsing_a_sentence():
    bad = '''
if run["reason"].startswith("spawn_failed"): pass
if (end.get("reason") or "").startswith("x"): pass
if f.run_reason.removeprefix("timeout after "): pass
r = f.run_reason or f.reason or ""
if r.startswith("timeout after "): pass
if "SIGTERM ignored" in case.reason: pass
head = esc.reason.split(":")[0]
m = re.match(r"timeout after (\\d+)s", row["verdict_reason"])
'''
    assert [line for line, _ in parsing_sites(bad)] == [2, 3, 4, 6, 7, 8, 9]


def test_the_check_lets_codes_be_compared_and_sentences_be_shown():
    fine = '''
if run["reason_code"] == EndReason.SPAWN_FAILED: pass
if f.reason_code in (EndReason.TIMEOUT, EndReason.BUDGET_EXCEEDED): pass
text = " ".join(str(esc.get("reason") or "").split())
line = f"{row['reason'][:80]}"
if state.startswith("time"): pass
'''
    assert parsing_sites(fine) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_parses_a_reason_sentence(path: Path):
    sites = parsing_sites(path.read_text(encoding="utf-8"))
    assert not sites, "; ".join(f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in sites)
