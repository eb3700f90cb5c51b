"""The Django model permissions a staff session needs, the same the admin asks for.

The dashboard, the REST API and ``/ws/events`` take a Django staff login;
like the admin, they then ask the user's model permissions (``view`` to
see, ``add`` to enqueue, ``change`` to act, ``delete`` to delete a task).
Each surface names the model it shows or acts on; API tokens are not
users and are not asked (scoped tokens are their own rule). A superuser
holds every permission.
"""

from __future__ import annotations

from typing import Any

APP = "conveyor"
# What a surface is about -> the model whose permissions guard it.
MODELS = {
    "task": "task",  # tasks, their events and history
    "queue": "queue",  # queues: pause, policy, rate and concurrency limits
    "group": "groupconfig",
    "cron": "cronentry",
    "webhook": "webhookregistration",
    "worker": "workersession",
    "node": "node",
}
ACTIONS = ("view", "add", "change", "delete")


def permission(action: str, resource: str) -> str:
    """``permission("change", "queue")`` -> ``"conveyor.change_queue"``."""
    if action not in ACTIONS:
        raise ValueError(f"not a model permission action: {action!r}")
    return f"{APP}.{action}_{MODELS[resource]}"


def missing_permission(user: Any, action: str, resource: str) -> str | None:
    """The permission *user* lacks for *action* on *resource*, or None."""
    needed = permission(action, resource)
    return None if user.has_perm(needed) else needed


def refusal(user: Any, needed: str) -> str:
    return f"{user.get_username()} lacks the {needed} permission (grant it in the admin's users or groups)"
