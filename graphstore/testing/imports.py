"""Which heavy libraries a piece of code imports, run in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def imported_by(code: str, modules: Sequence[str]) -> list[str]:
    """Those of `modules` in `sys.modules` after a new Python process runs `code` (from the
    repository's root, so its packages import as they do in the tests)."""
    report = (
        "\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in {list(modules)!r} if m in sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code + report],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPOSITORY,
    )
    found: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return found
