"""``manage.py conveyor_worker``: run this project's ``django.tasks`` functions on Conveyor."""

from __future__ import annotations

import logging
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from conveyor.django_tasks.runner import run_task
from conveyor.sdk import Release, Task, Worker, WorkerRefused
from conveyor.sdk.protocol import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED, MAX_PREFETCH
from conveyor.sdk.worker import DEFAULT_PREFETCH

logger = logging.getLogger("conveyor.worker")


def parse_queues(text: str) -> dict[str, int]:
    queues = {}
    for part in text.split(","):
        name, _, weight = part.partition("=")
        if not name.strip():
            raise CommandError(f"--queues: bad entry {part!r}; use name=weight,...")
        try:
            queues[name.strip()] = int(weight or 1)
        except ValueError:
            raise CommandError(f"--queues: weight of {name!r} must be an integer") from None
    return queues


class Handler:
    """Runs ``django:`` tasks; gives every other type back for a worker that has its function."""

    def __init__(self) -> None:
        self.unknown: set[str] = set()

    def __call__(self, task: Task) -> Any:
        close_old_connections()
        try:
            return run_task(task)
        except LookupError as exc:
            self.note_unknown(task.type, str(exc))
            raise Release() from None
        finally:
            close_old_connections()

    def note_unknown(self, task_type: str, why: str) -> None:
        # Once per type: the same tasks come back while no other worker takes them.
        if task_type not in self.unknown:
            self.unknown.add(task_type)
            logger.warning("no function for task type %r (%s): released for another worker", task_type, why)


class Command(BaseCommand):
    help = "Run django.tasks functions enqueued through conveyor.django_tasks.ConveyorBackend."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default=os.environ.get("CONVEYOR_URL", "http://127.0.0.1:8080"), help="node URL")
        parser.add_argument(
            "--token", default=os.environ.get("CONVEYOR_TOKEN"), help="API token (default $CONVEYOR_TOKEN)"
        )
        parser.add_argument("--queues", default="default=1", help="queues and weights, e.g. default=1,emails=3")
        parser.add_argument("--concurrency", type=int, default=8, help="functions run at once (default 8)")
        parser.add_argument(
            "--prefetch",
            type=int,
            default=DEFAULT_PREFETCH,
            help=f"tasks held beyond --concurrency, so the next is already here (0 to {MAX_PREFETCH}; "
            f"default {DEFAULT_PREFETCH})",
        )

    def handle(
        self, *args: Any, url: str, token: str | None, queues: str, concurrency: int, prefetch: int, **options: Any
    ) -> None:
        logging.getLogger("conveyor").setLevel(logging.INFO)
        if concurrency < 1:
            raise CommandError(f"--concurrency must be at least 1, not {concurrency}")
        if not 0 <= prefetch <= MAX_PREFETCH:
            raise CommandError(f"--prefetch must be from 0 to {MAX_PREFETCH}, not {prefetch}")
        worker = Worker(url, queues=parse_queues(queues), concurrency=concurrency, token=token, prefetch=prefetch)
        worker.task("*")(Handler())
        self.stdout.write(
            f"conveyor_worker: serving {queues} from {url} (concurrency {concurrency}, prefetch {prefetch}); "
            "Ctrl-C to stop"
        )
        try:
            worker.run()
        except WorkerRefused as exc:
            raise CommandError(refusal_message(exc, token)) from None


def refusal_message(exc: WorkerRefused, token: str | None) -> str:
    """One line for a refused session (the node may close without a reason)."""
    if exc.code == CLOSE_UNAUTHENTICATED:
        if token:
            return "the node refused the token (4401): check --token or CONVEYOR_TOKEN"
        return "the node requires authentication (4401): pass --token or set CONVEYOR_TOKEN"
    if exc.code == CLOSE_FORBIDDEN:
        why = exc.reason or "the token lacks the consume scope, or may not serve these queues"
        return f"the node refused this token for a worker session (4403): {why}"
    return str(exc)
