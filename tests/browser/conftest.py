"""Fixtures for the dashboard's browser tests: a live dev node, a staff login, real Chromium.

One node (``conveyord --dev`` on a fresh SQLite file) serves the whole
session; each test works in queues of its own so tests never see each
other's tasks. Every page fixture collects console errors and uncaught page
errors and fails the test on any it did not expect.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.support import ROOT, NodeProcess, Process, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
STAFF_USER, STAFF_PASSWORD = "operator", "conveyor-dashboard-test"
# Logs in through the form (test_access); a first login re-hashes the password,
# which would end the shared session if it were the same user.
LOGIN_USER = "newcomer"
DESKTOP = {"width": 1280, "height": 860}
NARROW = {"width": 390, "height": 844}
SCREENSHOTS = ROOT / "docs" / "screenshots"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


def node_env(db: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DATABASE_URL", "REDIS_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="conveyor_site.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        DATABASE_URL=f"sqlite:///{db}",
        CONVEYOR_VAR_DIR=str(db.parent),
    )
    env.update({f"CONVEYOR_{k.upper()}": v for k, v in settings.items()})
    return env


def migrated_template(tmp: Path) -> Path:
    """A migrated SQLite file that every node of the session starts from (a copy)."""
    db = tmp / "template.sqlite3"
    if not db.exists():
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=node_env(db), check=True
        )
    return db


class Node(NodeProcess):
    """A dev node on a fresh database with two staff users; ``session`` is already logged in as the first."""

    session: str


def start_node(tmp: Path, name: str, template: Path, **settings: str) -> Node:
    tmp.mkdir(parents=True, exist_ok=True)
    db = tmp / "conveyor.sqlite3"
    shutil.copyfile(template, db)
    env = node_env(db, **settings)
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", Path(__file__).with_name("staff.py").read_text()],
        cwd=ROOT,
        env={**env, "DASHBOARD_TEST_USERS": f"{STAFF_USER},{LOGIN_USER}", "DASHBOARD_TEST_PASSWORD": STAFF_PASSWORD},
        check=True,
        capture_output=True,
        text=True,
    )
    node = Node(env, dev=True, name=name)
    node.session = made.stdout.strip().splitlines()[-1]
    return node


def session_state(node: Node) -> dict[str, Any]:
    """Playwright storage state holding *node*'s staff session cookie."""
    host = node.url.split("//", 1)[1].split(":", 1)[0]
    cookie = {"name": "sessionid", "value": node.session, "domain": host, "path": "/", "httpOnly": True,
              "secure": False, "sameSite": "Lax", "expires": -1}  # fmt: skip
    return {"cookies": [cookie], "origins": []}


class DemoWorker(Process):
    """``tests/browser/demo_worker.py`` in its own process."""

    def __init__(self, node: NodeProcess, *, queues: dict[str, int], types: str, concurrency: int = 8,
                 labels: dict[str, str] | None = None) -> None:  # fmt: skip
        argv = [
            sys.executable, str(Path(__file__).with_name("demo_worker.py")), "--url", node.url,
            "--queues", ",".join(f"{q}={w}" for q, w in queues.items()), "--types", types,
            "--concurrency", str(concurrency), "--labels", json.dumps(labels or {}),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        super().__init__(argv, env, "demo-worker")
        self.node = node
        self.queues = queues
        wait_for(self._connected, timeout=20, what="the demo worker to connect")

    def _connected(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"demo worker exited:\n{self.output()[-3000:]}")
        sessions = self.node.api("GET", "/api/v1/workers")["workers"]
        return any(set(s["queues"]) == set(self.queues) for s in sessions)


@pytest.fixture(scope="package")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM}")
    return migrated_template(tmp_path_factory.mktemp("template"))


class NodePool:
    """Starts the session's nodes concurrently (each takes seconds); stops them at the end."""

    # Node names -> (test module that needs it, settings).
    KNOWN = {
        "dashboard": ("", {}),
        "read-only": ("test_read_only.py", {"read_only": "1"}),
        "demo": ("test_screenshots.py", {}),
    }

    def __init__(self, tmp_factory: pytest.TempPathFactory, template: Path) -> None:
        self.tmp_factory, self.template = tmp_factory, template
        self.pool = ThreadPoolExecutor(max_workers=len(self.KNOWN))
        self.futures: dict[str, Future[Node]] = {}

    def start(self, name: str) -> None:
        if name not in self.futures:
            settings = self.KNOWN[name][1]
            tmp = self.tmp_factory.mktemp(name)
            self.futures[name] = self.pool.submit(start_node, tmp, f"{name}-node", self.template, **settings)

    def get(self, name: str) -> Node:
        self.start(name)
        return self.futures[name].result()

    def close(self) -> None:
        for future in self.futures.values():
            # A node that failed to start was reported by the test that needed it.
            with contextlib.suppress(Exception):
                future.result().stop()
        self.pool.shutdown()


@pytest.fixture(scope="package")
def nodes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, template_db: Path
) -> Iterator[NodePool]:
    pool = NodePool(tmp_path_factory, template_db)
    modules = {Path(str(item.fspath)).name for item in request.session.items}
    for name, (module, _) in NodePool.KNOWN.items():
        if not module or module in modules:
            pool.start(name)
    yield pool
    pool.close()


@pytest.fixture(scope="package")
def node(nodes: NodePool) -> Node:
    return nodes.get("dashboard")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def login(page: Any, base: str, next_path: str = "/", user: str = LOGIN_USER) -> None:
    page.goto(f"{base}/admin/login/?next={next_path}")
    page.fill("#id_username", user)
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


@pytest.fixture(scope="package")
def staff_state(node: Node) -> dict[str, Any]:
    """Cookies of a logged-in staff session, shared by every page fixture."""
    return session_state(node)


class Dash:
    """A logged-in page on the dashboard, with its console errors collected."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.allowed: list[re.Pattern[str]] = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def goto(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        # Every dashboard page opens the events socket; wait until it is live.
        self.page.wait_for_selector('#live-status[data-state="live"]', timeout=10_000)
        return response

    def allow_console_error(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]

    def screenshot(self, name: str, out_dir: Path) -> Path:
        path = out_dir / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 1000
        return path

    def horizontal_overflow(self) -> int:
        return int(self.page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def _dash(browser: Any, node: NodeProcess, state: dict[str, Any] | None, viewport: dict[str, int]) -> Iterator[Dash]:
    context = browser.new_context(viewport=viewport, storage_state=state)
    context.set_default_timeout(20_000)
    dash = Dash(context.new_page(), node.url)
    yield dash
    context.close()
    errors = dash.unexpected_errors()
    assert not errors, "errors in the browser console:\n" + "\n".join(errors)


@pytest.fixture
def dash(browser: Any, node: NodeProcess, staff_state: dict[str, Any]) -> Iterator[Dash]:
    yield from _dash(browser, node, staff_state, DESKTOP)


@pytest.fixture
def narrow(browser: Any, node: NodeProcess, staff_state: dict[str, Any]) -> Iterator[Dash]:
    yield from _dash(browser, node, staff_state, NARROW)


@pytest.fixture
def anonymous(browser: Any, node: NodeProcess) -> Iterator[Dash]:
    yield from _dash(browser, node, None, DESKTOP)


@pytest.fixture
def q(request: pytest.FixtureRequest) -> str:
    """A queue name of this test's own."""
    return f"{request.node.name.removeprefix('test_')[:40].replace('_', '-')}-{uuid.uuid4().hex[:4]}"


@pytest.fixture(scope="package")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/screenshots with UPDATE_SCREENSHOTS=1, else a temporary directory."""
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return SCREENSHOTS
    return tmp_path_factory.mktemp("screenshots")


def api(node: NodeProcess, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """A raw API call (status not checked), for asserting refusals."""
    return node.http.request(method, path, **kwargs)
