"""ASGI entry point of the standalone project (``uvicorn conveyor_site.asgi:application``)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conveyor_site.settings")

from conveyor.asgi import application

__all__ = ["application"]
