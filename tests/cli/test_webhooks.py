"""``conveyor webhooks add|list|pause|resume|delete``."""

from __future__ import annotations

import pytest

from conveyor.broker.types import WebhookSpec
from conveyor.models import WebhookRegistration
from tests.cli.support import fails, run, table

pytestmark = pytest.mark.django_db(transaction=True)


def test_webhooks_add_registers_every_field(broker):
    result = run(
        "webhooks", "add", "billing-hooks", "https://hooks.example.com/tasks", "--queue", "billing=3", "--queue", "default",
        "--secret", "new", "--secret", "old", "--concurrency", "8", "--batch-type", "digest", "--request-timeout", "20s",
    )  # fmt: skip

    reg = broker.get_webhook("billing-hooks")
    assert result.out.strip() == (
        "registered webhook billing-hooks -> https://hooks.example.com/tasks (queues billing=3,default=1; concurrency 8; 2 secrets)"
    )
    assert result.err == ""
    assert (reg.queues, reg.concurrency, reg.secrets) == ({"billing": 3, "default": 1}, 8, ["new", "old"])
    assert (reg.batch_types, reg.request_timeout, reg.paused) == (["digest"], 20.0, False)


def test_webhooks_add_http_url_works_with_a_warning(broker):
    result = run("webhooks", "add", "demo", "http://localhost:9090/tasks", "--queue", "email=1", "--paused")

    assert broker.get_webhook("demo").url == "http://localhost:9090/tasks"
    assert result.out.startswith("registered webhook demo -> http://localhost:9090/tasks")
    assert result.err.startswith(
        "warning: http://localhost:9090/tasks is plain http://, which only dev or unauthenticated"
    )
    assert len(result.err.splitlines()) == 1


def test_webhooks_add_json_never_shows_secrets(broker):
    data = run("--json", "webhooks", "add", "h", "https://x.example/t", "--queue", "q", "--secret", "s3cret").json()

    assert data["secret_count"] == 1
    assert "s3cret" not in str(data)


def test_webhooks_add_bad_input_names_the_flag_and_stores_nothing():
    assert (
        fails("webhooks", "add", "h", "https://x.example/t", "--queue", "q=heavy")
        == "--queue q: 'heavy' is not an integer"
    )
    assert (
        fails("webhooks", "add", "h", "https://x.example/t", "--queue", "q=0")
        == "--queue q: must be between 1 and 1000"
    )
    assert (
        fails("webhooks", "add", "h", "ftp://x.example/t", "--queue", "q")
        == "url: must be an absolute http:// or https:// URL"
    )
    assert fails("webhooks", "add", "h", "https://x.example/t", "--queue", "q", "--secret", "1", "--secret", "2",
                 "--secret", "3") == "--secret: at most 2 (newest first, for rotation)"  # fmt: skip
    assert fails("webhooks", "add", "h", "https://x.example/t", "--queue", "q", "--request-timeout", "slow").startswith(
        "--request-timeout: invalid duration 'slow'"
    )
    assert not WebhookRegistration.objects.exists()


def test_webhooks_list(broker):
    broker.upsert_webhook(WebhookSpec(name="a", url="https://a.example/t", queues={"q": 2}, secrets=["s"], paused=True))
    broker.upsert_webhook(WebhookSpec(name="b", url="https://b.example/t", queues={"q": 1}, request_timeout=90))

    result = run("webhooks", "list")

    assert table(result) == [
        ["NAME", "URL", "QUEUES", "CONCURRENCY", "SECRETS", "BATCH_TYPES", "TIMEOUT", "PAUSED", "BREAKER"],
        ["a", "https://a.example/t", "q=2", "10", "1", "-", "-", "yes", "-"],
        ["b", "https://b.example/t", "q=1", "10", "0", "-", "1m30s", "no", "-"],
    ]
    listed = run("--json", "webhooks", "list").json()["webhooks"]
    assert [w["secret_count"] for w in listed] == [1, 0]
    assert all("secrets" not in w for w in listed)


def test_webhooks_pause_and_resume(broker):
    broker.upsert_webhook(WebhookSpec(name="a", url="https://a.example/t", queues={"q": 1}))

    assert run("webhooks", "pause", "a").out.strip() == "paused webhook a"
    assert broker.get_webhook("a").paused
    assert run("webhooks", "resume", "a").out.strip() == "resumed webhook a"
    assert not broker.get_webhook("a").paused


def test_webhooks_pause_unknown_fails():
    assert fails("webhooks", "pause", "ghost") == "webhook registration ghost not found"


def test_webhooks_delete(broker):
    broker.upsert_webhook(WebhookSpec(name="a", url="https://a.example/t", queues={"q": 1}))

    assert run("webhooks", "delete", "a").out.strip() == "deleted webhook a"
    assert not WebhookRegistration.objects.exists()
    assert run("webhooks", "delete", "a").out.strip() == "no webhook a (nothing to delete)"
