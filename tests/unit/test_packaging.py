"""pyproject.toml declares what the package imports, and the SDK stays Django-free."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def top_level_imports(paths: list[Path]) -> set[str]:
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"conveyor", "__future__"}


def undeclared(modules: set[str], allowed: set[str]) -> set[str]:
    """The *modules* no distribution in *allowed* provides (in this venv)."""
    provided = packages_distributions()
    missing = {m for m in modules if m not in provided}
    assert not missing, f"imported but not installed: {missing}"
    # (A module may come from several distributions: Twisted's plugins
    # directory is shared with autobahn's.)
    return {m for m in modules if not {normal(d) for d in provided[m]} & allowed}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def declared(requirements: list[str]) -> set[str]:
    return {normal(re.split(r"[\[<>=!~;\s]", r, maxsplit=1)[0]) for r in requirements}


def test_every_package_conveyor_imports_is_a_declared_dependency() -> None:
    # Installed with the ones declared (Django brings asgiref).
    allowed = declared(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["server"]) | {"asgiref"}
    assert not undeclared(top_level_imports(list((ROOT / "conveyor").rglob("*.py"))), allowed)


def test_the_sdk_imports_only_the_base_dependencies() -> None:
    encryption = ROOT / "conveyor" / "sdk" / "encryption.py"
    sdk = top_level_imports([p for p in (ROOT / "conveyor" / "sdk").rglob("*.py") if p != encryption])
    assert not undeclared(sdk, declared(PROJECT["dependencies"]))
    # End-to-end encryption is the one optional part: the `encryption` extra.
    extra = declared(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["encryption"])
    assert not undeclared(top_level_imports([encryption]), extra)


def test_the_version_is_read_from_the_package() -> None:
    assert "version" in PROJECT["dynamic"] and "version" not in PROJECT
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+', (ROOT / "conveyor" / "__init__.py").read_text(), re.M)
