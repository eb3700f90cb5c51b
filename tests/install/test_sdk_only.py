"""A worker-only install: the wheel without extras is the SDK, and pulls no Django
(nor httpx: the SDK's HTTP is urllib3's)."""

from __future__ import annotations

from pathlib import Path

from tests.install.conftest import fresh_venv, run

PROBE = """
import importlib.util, json
from conveyor.sdk import AsyncClient, AsyncWorker, Client, Worker
print(json.dumps({name: importlib.util.find_spec(name) is not None
                  for name in ("django", "channels", "psycopg", "rest_framework", "httpx")}))
"""


def test_the_base_install_imports_the_sdk_without_django(tmp_path: Path, wheel: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    run([python, "-m", "pip", "install", "--quiet", wheel])
    out = run([python, "-c", PROBE], cwd=tmp_path)
    assert out.strip().splitlines()[-1] == (
        '{"django": false, "channels": false, "psycopg": false, "rest_framework": false, "httpx": false}'
    )
    installed = run([python, "-m", "pip", "list", "--format=freeze"]).lower()
    assert "django" not in installed, installed
