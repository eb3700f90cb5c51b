"""The wheel in a fresh venv, added to a new Django project as docs/install.md says.

Nothing from this checkout is on the path: the host project sees only what
``pip install "conveyor[server]"`` installed, and gets only the settings,
URLs and task module that docs/install.md shows (its Python blocks that
start with ``# mysite/<file>``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.support import ROOT, NodeProcess, Process, wait_for
from tests.install.conftest import fresh_venv, run

CHROMIUM = "/usr/bin/chromium"
PROJECT = "mysite"
BLOCK = re.compile(r"```python\n# (mysite/[\w/]+\.py)\n(.*?)```", re.S)
PASSWORD = "install-test-password"


def doc_blocks() -> list[tuple[str, str]]:
    """(file, code) of each block docs/install.md asks to put into the project."""
    blocks = BLOCK.findall((ROOT / "docs" / "install.md").read_text())
    assert {"mysite/settings.py", "mysite/urls.py", "mysite/tasks.py"} <= {name for name, _ in blocks}
    return blocks


def apply_doc(project: Path) -> None:
    for name, code in doc_blocks():
        path = project / name
        if name.endswith("urls.py"):
            # The one import line the doc asks for alongside its block.
            text = path.read_text().replace("from django.urls import path", "from django.urls import include, path")
            path.write_text(text)
        with path.open("a") as f:
            f.write("\n" + code)


def host_env() -> dict[str, str]:
    """The environment of a new user's shell: no checkout, no Conveyor or Django variables."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DJANGO_", "DATABASE_URL", "REDIS_URL"))
    }
    env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("host")
    python = fresh_venv(tmp / "venv")
    bin_dir = python.parent
    run([python, "-m", "pip", "install", "--quiet", f"{wheel}[server]"])
    run([bin_dir / "django-admin", "startproject", PROJECT, tmp / "project"])
    project = tmp / "project"
    apply_doc(project)
    return {"python": python, "project": project, "env": host_env()}


def manage(host: dict[str, Any], *args: str, **env: str) -> str:
    return run([host["python"], host["project"] / "manage.py", *args], cwd=host["project"], env={**host["env"], **env})


def test_the_wheel_holds_no_generic_top_level_package(wheel: Path) -> None:
    import zipfile

    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith((".dist-info", ".data"))} == {"conveyor"}


def test_a_new_project_runs_a_task_and_shows_the_dashboard(host: dict[str, Any]) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"the dashboard check needs Debian's chromium at {CHROMIUM}")
    project, python = host["project"], host["python"]
    out = manage(host, "check")
    assert "System check identified no issues" in out, out
    manage(host, "migrate", "--noinput", "-v0")
    manage(host, "createsuperuser", "--noinput", "--username", "ada", "--email", "ada@example.com",
           DJANGO_SUPERUSER_PASSWORD=PASSWORD)  # fmt: skip

    node = NodeProcess(host["env"], dev=True, name="the host project's node", python=str(python), project=project)
    worker = None
    try:
        url = node.url
        base = url + "/conveyor"
        assert httpx.get(base + "/healthz").json()["status"] == "ok"
        worker = Process(
            [str(python), "manage.py", "conveyor_worker", "--url", base], host["env"], "worker", cwd=project
        )
        wait_for(lambda: httpx.get(base + "/api/v1/workers").json()["workers"], timeout=30, what="the worker")

        task_id = manage(
            host, "shell", "-v", "0", "-c", "from mysite.tasks import add; print(add.enqueue(2, 3).id)"
        ).strip()
        read = f"from mysite.tasks import add; r = add.get_result({task_id!r}); print(r.status.name, r.return_value if r.is_finished else '')"
        done = wait_for(
            lambda: _finished(manage(host, "shell", "-v", "0", "-c", read)), timeout=30, what="the task to finish"
        )
        assert done == "SUCCESSFUL 5", node.output()[-3000:] + worker.output()[-3000:]
        # Kept past the reaper's next pass (the backend's result retention).
        assert "reaper:" in manage(host, "conveyor", "sweep", "--once", "--only", "reaper")
        assert _finished(manage(host, "shell", "-v", "0", "-c", read)) == "SUCCESSFUL 5"

        _dashboard_loads(url, base)
    finally:
        if worker is not None:
            worker.stop()
        node.stop()


def _finished(output: str) -> str | None:
    line = output.strip().splitlines()[-1] if output.strip() else ""
    return line if line.split(" ")[0] in ("SUCCESSFUL", "FAILED") else None


def _dashboard_loads(url: str, base: str) -> None:
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            assets: dict[str, int] = {}
            page.on("response", lambda r: assets.__setitem__(r.url, r.status) if "/static/" in r.url else None)
            page.goto(f"{url}/admin/login/?next=/conveyor/")
            page.fill("input[name=username]", "ada")
            page.fill("input[name=password]", PASSWORD)
            with page.expect_navigation():
                page.click("input[type=submit]")
            response = page.goto(base + "/")
            assert response is not None and response.status == 200, (
                response and response.status,
                page.content()[:3000],
            )
            text = page.content()
            assert "TemplateDoesNotExist" not in text and "TemplateSyntaxError" not in text
            assert page.title().startswith("Overview"), page.title()
            styles = [u for u in assets if u.endswith(".css")]
            # The login page and the dashboard share the admin's stylesheets: the
            # browser may revalidate them the second time (304 Not Modified).
            assert styles and all(assets[u] in (200, 304) for u in styles), {u: assets[u] for u in styles}
        finally:
            browser.close()
