"""``manage.py conveyor <group> <verb>``: the operator CLI.

Each module registers its group with ``register(subparsers)`` and gives
every verb a handler ``fn(args, out) -> None``. Handlers call the broker and
raise ``ConveyorError`` (or ``CommandError``) on failure; the command turns
those into one clear line and a non-zero exit.
"""

from __future__ import annotations

from importlib import import_module

GROUP_MODULES = [
    "enqueue", "tasks", "queues", "limits", "groups", "cron", "webhooks", "cluster", "events", "sweep", "tokens",
    "keys",
]  # fmt: skip


def register_all(subparsers: object) -> None:
    for name in GROUP_MODULES:
        import_module(f"conveyor.cli.{name}").register(subparsers)
