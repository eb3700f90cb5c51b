"""The ``conveyor.v1`` Connect services (TaskService, AdminService, WebhookService).

``conveyor.asgi`` serves them under the prefix ``conveyor.urls`` is mounted
at; a host project with an ASGI application of its own wraps its HTTP side::

    from conveyor.connect import mount
    application = ProtocolTypeRouter({"http": mount(django_asgi, prefix="/conveyor/"), ...})
"""

from __future__ import annotations

from typing import Any


def mount(app: Any, prefix: str = "/") -> Any:
    """Serve the Connect services at ``<prefix>conveyor.v1.*`` in front of the ASGI application *app*."""
    from conveyor.connect.app import mount as mount_app  # imports models: only once Django is set up

    return mount_app(app, prefix)
