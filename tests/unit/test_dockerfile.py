"""The Dockerfile, read as Docker reads it (no daemon here to build it).

Checks what a build would show: a separate build stage, a runtime stage
that installs the pinned runtime set only, copies no tests, benchmarks or
docs, runs as a non-root user with a HEALTHCHECK on /readyz, and no step
whose failure is hidden.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEV_ONLY = ("requirements-dev.txt", "pytest", "ruff", "playwright", "schemathesis", "import-linter")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):  # (also inside a continued instruction)
            continue
        pending += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            keyword, _, args = pending.partition(" ")
            out.append((keyword.upper(), args.strip()))
            pending = ""
    return out


def stages(steps: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for step in steps:
        if step[0] == "FROM":
            out.append([])
        out[-1].append(step)
    return out


STEPS = instructions((ROOT / "Dockerfile").read_text())
FINAL = stages(STEPS)[-1]


def test_the_image_is_built_in_stages() -> None:
    assert len(stages(STEPS)) >= 2
    assert any(kind == "COPY" and args.startswith("--from=") for kind, args in FINAL)


def test_the_runtime_runs_as_a_user_that_is_not_root() -> None:
    users = [args for kind, args in FINAL if kind == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    # ...and the process starts after it (nothing switches back).
    last_user = max(i for i, (kind, _) in enumerate(FINAL) if kind == "USER")
    assert [kind for kind, _ in FINAL[last_user:]].count("CMD") == 1


def test_the_healthcheck_asks_readyz() -> None:
    (check,) = [args for kind, args in FINAL if kind == "HEALTHCHECK"]
    assert "/readyz" in check and "CMD" in check


def test_the_install_steps_take_runtime_packages_only() -> None:
    installs = [args for kind, args in STEPS if kind == "RUN" and "pip " in args]
    assert installs
    for args in installs:
        assert not [word for word in DEV_ONLY if word in args], args
        for file in re.findall(r"-r\s+(\S+)", args):
            pinned = (ROOT / file).read_text()
            assert not [w for w in DEV_ONLY if re.search(rf"^{re.escape(w)}\b", pinned, re.M)], file
            assert "-r requirements-dev" not in pinned


def test_the_runtime_copies_no_tests_benchmarks_or_docs() -> None:
    for kind, args in FINAL:
        if kind in ("COPY", "ADD") and not args.startswith("--from="):
            sources = shlex.split(args)[:-1]
            assert "." not in sources and "./" not in sources, args  # not the whole context
            assert not [s for s in sources if s.split("/")[0] in ("tests", "bench", "docs", "examples")], args


def test_no_step_hides_a_failure() -> None:
    for kind, args in STEPS:
        assert "|| true" not in args and "|| :" not in args, (kind, args)


def test_the_node_starts_in_production_mode() -> None:
    (cmd,) = [args for kind, args in FINAL if kind == "CMD"]
    assert "conveyord" in cmd and "--dev" not in cmd
