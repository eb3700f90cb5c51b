"""Webhook registrations: upsert replaces every field, validation, delete, pause."""

from __future__ import annotations

import pytest

from conveyor.broker.types import WebhookSpec
from conveyor.exceptions import InvalidArgument, NotFound
from conveyor.models import WebhookRegistration


def spec(**fields):
    values = {"name": "billing", "url": "https://hooks.example.com/run", "queues": {"billing": 1}}
    values.update(fields)
    return WebhookSpec(**values)


def rows(broker):
    return list(WebhookRegistration.objects.using(broker.db).order_by("name").values())


def test_upsert_creates_a_registration(broker, clock):
    reg = broker.upsert_webhook(
        spec(
            queues={"billing": 3, "mail": 1},
            concurrency=4,
            secrets=["new-secret", "old-secret"],
            batch_types=["invoice:render"],
            request_timeout=12.5,
        )
    )

    stored = broker.get_webhook("billing")
    assert (stored.url, stored.queues, stored.concurrency) == (
        "https://hooks.example.com/run",
        {"billing": 3, "mail": 1},
        4,
    )
    assert (stored.secrets, stored.batch_types, stored.request_timeout) == (
        ["new-secret", "old-secret"],
        ["invoice:render"],
        12.5,
    )
    assert stored.paused is False
    assert stored.created_at == stored.updated_at == clock.now() == reg.created_at


def test_upsert_replaces_every_field(broker, clock):
    broker.upsert_webhook(
        spec(queues={"billing": 3}, concurrency=4, secrets=["s1"], batch_types=["t"], request_timeout=5, paused=True)
    )
    created = broker.get_webhook("billing").created_at
    clock.advance(60)

    broker.upsert_webhook(spec(url="http://other.example.com/", queues={"mail": 2}))

    stored = broker.get_webhook("billing")
    assert (stored.url, stored.queues, stored.concurrency, stored.secrets) == (
        "http://other.example.com/",
        {"mail": 2},
        10,
        [],
    )
    assert (stored.batch_types, stored.request_timeout, stored.paused) == ([], None, False)
    assert (stored.created_at, stored.updated_at) == (created, clock.now())


def test_list_orders_by_name(broker):
    for name in ("zeta", "alpha", "mid"):
        broker.upsert_webhook(spec(name=name))

    assert [r.name for r in broker.list_webhooks()] == ["alpha", "mid", "zeta"]


def test_delete_is_idempotent(broker):
    broker.upsert_webhook(spec())

    broker.delete_webhook("billing")
    broker.delete_webhook("billing")
    broker.delete_webhook("never-existed")

    assert broker.list_webhooks() == []
    with pytest.raises(NotFound):
        broker.get_webhook("billing")


def test_pause_and_resume(broker):
    broker.upsert_webhook(spec())

    assert broker.set_webhook_paused("billing", True).paused is True
    assert broker.get_webhook("billing").paused is True
    broker.set_webhook_paused("billing", False)
    assert broker.get_webhook("billing").paused is False
    with pytest.raises(NotFound):
        broker.set_webhook_paused("missing", True)


def test_zero_one_or_two_secrets_are_accepted(broker):
    for n in (0, 1, 2):
        secrets = [f"secret-{i}" for i in range(n)]
        broker.upsert_webhook(spec(secrets=secrets))
        assert broker.get_webhook("billing").secrets == secrets


def test_invalid_registrations_are_rejected_and_nothing_changes(broker):
    broker.upsert_webhook(spec())
    before = rows(broker)
    bad = [
        (spec(secrets=["a", "b", "c"]), "secrets"),
        (spec(secrets=[""]), "secrets[0]"),
        (spec(concurrency=0), "concurrency"),
        (spec(concurrency=2.5), "concurrency"),
        (spec(queues={}), "queues"),
        (spec(queues={"billing": 0}), "queues.billing"),
        (spec(queues={"bad queue": 1}), "queues"),
        (spec(url="ftp://files.example.com/"), "url"),
        (spec(url="/relative/path"), "url"),
        (spec(url="https://user:pw@hooks.example.com/"), "url"),
        (spec(url=""), "url"),
        (spec(request_timeout=-1), "request_timeout"),
        (spec(name="bad name"), "name"),
        (spec(name=""), "name"),
    ]

    for webhook, field in bad:
        with pytest.raises(InvalidArgument) as err:
            broker.upsert_webhook(webhook)
        assert err.value.field == field, webhook

    assert rows(broker) == before
