"""Liveness and readiness probes."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse

from conveyor import __version__


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up."""
    return JsonResponse({"status": "ok", "version": __version__})


def readyz(request: HttpRequest) -> JsonResponse:
    """The database and the channel layer answer."""
    checks = {"database": _check(_database), "channel_layer": _check(_channel_layer)}
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503)


def _check(probe: object) -> str:
    try:
        probe()  # type: ignore[operator]
    except Exception as exc:  # a probe reports, it does not raise
        return f"error: {exc}"
    return "ok"


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    # A send to a group nobody joined: a full round trip, no side effects.
    async_to_sync(layer.group_send)("conveyor.readyz", {"type": "conveyor.readyz"})
