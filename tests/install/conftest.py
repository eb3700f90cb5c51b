"""Fixtures for the install tests: the wheel built from this checkout, fresh venvs.

The wheel is built once per session from a copy of the checkout's files
(tracked or new, as they are on disk; so a build never writes into the
checkout), and every
venv is made from nothing with the interpreter running the tests; pip may
use its cache and the package index.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.e2e.support import ROOT


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/install/" in str(item.fspath):
            item.add_marker(pytest.mark.slow)


def run(argv: list[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> str:  # fmt: skip
    """Run *argv*; on failure, fail the test with its output."""
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    return done.stdout


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    listed = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # (a file deleted but not yet staged is listed too)
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", out, source])
    (built,) = out.glob("conveyor-*.whl")
    return built


def fresh_venv(path: Path) -> Path:
    """A new venv at *path* with nothing but pip; return its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"
