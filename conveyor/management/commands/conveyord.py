"""``manage.py conveyord``: start one Conveyor node."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from django.conf import settings
from django.core.checks import Tags, run_checks
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from conveyor.conf import conveyor_settings
from conveyor.logs import set_node
from conveyor.mount import prefix

logger = logging.getLogger("conveyor.node")


class Command(BaseCommand):
    help = "Start a Conveyor node: HTTP API, worker WebSockets, dispatchers and sweepers."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
        parser.add_argument(
            "--port", type=int, default=8080, help="port to listen on (default 8080; 0 = any free port)"
        )
        parser.add_argument(
            "--dev",
            action="store_true",
            help="development mode: the project's own database and channel layer (Conveyor's standalone project: "
            "SQLite and in-memory unless DATABASE_URL/REDIS_URL say otherwise), migrations applied, auth off, "
            "private webhook targets allowed",
        )

    def handle(self, *args: Any, host: str, port: int, dev: bool, **options: Any) -> None:
        if dev:
            apply_dev_defaults()
            call_command("migrate", interactive=False, verbosity=0)
        else:
            check_production()
        # A production node runs the deployment checks too (their warnings
        # are printed; errors stop it).
        call_command("check", deploy=not dev)
        from django.contrib.auth import get_user_model

        from conveyor.dispatch.server import serve

        has_login = get_user_model().objects.filter(is_staff=True, is_active=True).exists()
        mounted = mount_prefix()

        def ready(url: str) -> None:
            from conveyor.dispatch.node import current_node

            node = current_node()
            if node is not None:
                set_node(node.id)  # the `node` field of JSON logs
            mode = "dev" if dev else "production"
            self.stdout.write(f"Conveyor node listening on {url} ({mode}; {connection.vendor})")
            self.stdout.write(f"  dashboard {url}{mounted}   API docs {url}{mounted}api/v1/docs")
            if dev and not conveyor_settings.API_TOKENS:
                self.stdout.write("  authentication is off (dev mode): keep this node on a trusted interface")
            if not has_login:
                # Never echo the URL itself: it may carry a password.
                same_db = " (with the same DATABASE_URL)" if os.environ.get("DATABASE_URL") else ""
                self.stdout.write(
                    f"  no dashboard login yet: create one with `{interpreter()} manage.py createsuperuser`{same_db}"
                )
            self.stdout.flush()

        status = serve(host, port, dev=dev, ready=ready)
        if status:
            raise CommandError(
                f"could not listen on {host}:{port} (is another process using it?); pick another with --port"
                " (`make run PORT=8081`)"
            )
        sys.exit(status)


def mount_prefix() -> str:
    try:
        return prefix()
    except LookupError:
        raise CommandError(
            'conveyor.urls is not in this project\'s URLconf: add path("conveyor/", include("conveyor.urls")) '
            "to ROOT_URLCONF (docs/install.md)"
        ) from None


def interpreter() -> str:
    """How to name this Python in a hint: its path when it lives under the
    current directory (a project's ``.venv/bin/python``), else ``python``."""
    relative = os.path.relpath(sys.executable)
    return "python" if relative.startswith("..") or os.path.isabs(relative) else relative


def insecure_secret_key() -> bool:
    """Whether Django's own deployment check finds SECRET_KEY weak (security.W009:
    ``django-insecure-`` keys, short ones, ones of few distinct characters)."""
    found = run_checks(include_deployment_checks=True, tags=[Tags.security])
    return any(message.id == "security.W009" for message in found)


def apply_dev_defaults() -> None:
    """Dev mode: auth off unless tokens are set explicitly; private webhook targets allowed."""
    overrides: dict[str, Any] = {"ALLOW_UNAUTHENTICATED": True}
    if "CONVEYOR_WEBHOOKS_ALLOW_PRIVATE_TARGETS" not in os.environ:
        overrides["WEBHOOKS_ALLOW_PRIVATE_TARGETS"] = True
    settings.CONVEYOR = {**(getattr(settings, "CONVEYOR", None) or {}), **overrides}
    conveyor_settings.reload()
    logging.getLogger("conveyor").setLevel(
        logging.DEBUG if os.environ.get("CONVEYOR_LOG_LEVEL") == "DEBUG" else logging.INFO
    )


def check_production() -> None:
    """Outside --dev a node needs Postgres, Redis and (normally) API tokens."""
    problems = []
    if connection.vendor != "postgresql":
        problems.append("DATABASE_URL must point at PostgreSQL (postgres://...) outside --dev")
    if "redis" not in settings.CHANNEL_LAYERS["default"]["BACKEND"].lower():
        problems.append("REDIS_URL must be set outside --dev (nodes share wakes through Redis)")
    if insecure_secret_key():
        problems.append(
            "SECRET_KEY is a default or weak key (it signs sessions and webhook lease tokens): set "
            "DJANGO_SECRET_KEY (or SECRET_KEY) to 50+ random characters, e.g. from "
            "`python -c 'from django.core.management.utils import get_random_secret_key as k; print(k())'`"
        )
    if not conveyor_settings.API_TOKENS and not conveyor_settings.ALLOW_UNAUTHENTICATED:
        problems.append(
            "CONVEYOR_API_TOKENS is empty: set tokens, or CONVEYOR_ALLOW_UNAUTHENTICATED=1 to run without auth"
        )
    if problems:
        raise CommandError("refusing to start:\n  - " + "\n  - ".join(problems) + "\n(use --dev for a local node)")
    if not conveyor_settings.API_TOKENS:
        logger.warning("AUTHENTICATION IS OFF: anyone who can reach this node can enqueue, read and change tasks")
