"""Imports run downward only: the layers contract in pyproject.toml ([tool.importlinter]),
checked by import-linter. The domain (ticket_server/tickets) imports nothing above it,
and no runtime module imports the operator commands (ticket_server/admin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_imports_run_downward_only() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 broken" in proc.stdout and "kept" in proc.stdout
