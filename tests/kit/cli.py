"""The real ``watchkeeper`` command as a subprocess (its own logging setup, stderr and exit
status exactly as an operator sees them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WK = str(Path(sys.executable).parent / "watchkeeper")


def wk(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``watchkeeper ARGS`` in ``cwd``; text output captured."""
    return subprocess.run([WK, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
