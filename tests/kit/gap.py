"""Runner-gap rigs: a command sink that appends each notification to a file, and its reader."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.kit.runners import FAST_TOML

PY = sys.executable


def sink_toml(out: Path, owner: str = "ana") -> str:
    script = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))"
    return (f'owner = "{owner}"\n' + FAST_TOML
            + f'[[notify]]\ntype = "command"\nname = "pager"\ncommand = {json.dumps([PY, "-c", script])}\n')


def sent(out: Path) -> list[dict]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
