"""Webhook registrations: which HTTP endpoints serve which queues."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from conveyor.broker.base import Context
from conveyor.broker.types import WebhookSpec
from conveyor.broker.validation import check_int, check_queue_name, check_seconds, check_storable, check_text
from conveyor.exceptions import InvalidArgument, NotFound
from conveyor.models import WebhookRegistration

MAX_SECRETS = 2


def check_webhook(spec: WebhookSpec) -> dict[str, Any]:
    """Validate a registration; return its column values."""
    name = check_text(spec.name, "name", 100, required=True)
    assert name is not None
    if not name[0].isalnum() or not all(ch.isalnum() or ch in "._-" for ch in name):
        raise InvalidArgument("name", "may contain only letters, digits and . _ -")
    url = check_text(spec.url, "url", 2000, required=True)
    try:
        parts = urlsplit(url or "")
        parts.port  # noqa: B018  (raises ValueError for a port out of range)
    except ValueError as exc:
        raise InvalidArgument("url", f"is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument("url", "must be an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise InvalidArgument("url", "must not carry credentials")
    if not isinstance(spec.queues, dict) or not spec.queues:
        raise InvalidArgument("queues", "must name at least one queue with a weight")
    queues = {}
    for queue, weight in spec.queues.items():
        check_queue_name(queue, "queues")
        queues[queue] = check_int(weight, f"queues.{queue}", 1, 1000)
    secrets = list(spec.secrets or ())
    if len(secrets) > MAX_SECRETS:
        raise InvalidArgument("secrets", f"at most {MAX_SECRETS} (newest first, for rotation)")
    for i, secret in enumerate(secrets):
        if not isinstance(secret, str) or not secret or len(secret) > 500:
            raise InvalidArgument(f"secrets[{i}]", "must be a non-empty string of at most 500 characters")
        check_storable(secret, f"secrets[{i}]")
    batch_types = [check_text(t, "batch_types", 200, required=True) for t in spec.batch_types or ()]
    timeout = None if spec.request_timeout is None else check_seconds(spec.request_timeout, "request_timeout")
    return {
        "url": url,
        "queues": queues,
        "concurrency": check_int(spec.concurrency, "concurrency", 1, 10_000),
        "secrets": secrets,
        "batch_types": batch_types,
        "request_timeout": timeout,
        "paused": bool(spec.paused),
    }


class Registrations:
    """Webhook registrations."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def webhooks(self) -> Any:
        return WebhookRegistration.objects.db_manager(self.ctx.db)

    def upsert_webhook(self, spec: WebhookSpec) -> WebhookRegistration:
        """Create or replace a registration (every field)."""
        values = check_webhook(spec)
        now = self.ctx.now()
        values["updated_at"] = now
        reg, _ = self.webhooks.update_or_create(
            name=spec.name, defaults=values, create_defaults={**values, "created_at": now}
        )
        return reg

    def get_webhook(self, name: str) -> WebhookRegistration:
        reg = self.webhooks.filter(name=name).first()
        if reg is None:
            raise NotFound(f"webhook registration {name} not found", name=name)
        return reg

    def list_webhooks(self) -> list[WebhookRegistration]:
        return list(self.webhooks.order_by("name"))

    def set_webhook_paused(self, name: str, paused: bool) -> WebhookRegistration:
        reg = self.get_webhook(name)
        reg.paused, reg.updated_at = bool(paused), self.ctx.now()
        reg.save(update_fields=["paused", "updated_at"])
        return reg

    def delete_webhook(self, name: str) -> None:
        self.webhooks.filter(name=name).delete()
