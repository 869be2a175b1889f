"""Every module of ``core.spec`` imports on its own, first, in a fresh interpreter.

The model and the loader once re-exported each other's names, which worked only when the
model happened to be imported first. Each name now lives in one module and the loader
imports the model, never the other way round; this test fails on any import cycle in the
package whichever module a caller reaches first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(f"core.spec.{p.stem}" for p in (ROOT / "core" / "spec").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", MODULES)
def test_imports_first_in_a_fresh_interpreter(module: str):
    res = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr


def test_the_model_does_not_lend_the_loaders_names():
    from core.spec import model

    assert not hasattr(model, "__getattr__") and not hasattr(model, "load_dir")
