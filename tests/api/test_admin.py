"""Operator endpoints over REST: queues, limits, groups, cron, webhooks, cluster."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor import cluster
from conveyor.models import CronEntry, GroupConfig, Queue, WebhookRegistration, WebhookStatus
from tests.api.conftest import enqueue, ok, refused, state_of_everything

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-that-must-never-be-shown"
OLD_SECRET = "older-s3cret-also-hidden"


# -- queues ------------------------------------------------------------------------------


def test_queues_list_counts_per_state_with_limits(api, broker):
    enqueue(broker, queue="mail")
    enqueue(broker, queue="mail", process_in=60)
    broker.set_queue_paused("idle", True)
    broker.set_rate_limit("mail", 5, 2)
    broker.set_concurrency_limit("mail", 3)
    queues = {q["name"]: q for q in ok(api.get("/api/v1/queues"))["queues"]}
    assert list(queues) == ["idle", "mail"]
    mail = queues["mail"]
    assert (mail["counts"]["pending"], mail["counts"]["scheduled"], mail["total"]) == (1, 1, 2)
    assert mail["rate_limit"] == {"rate": 5.0, "burst": 2}
    assert mail["concurrency_limit"] == 3
    assert (queues["idle"]["paused"], queues["idle"]["total"], queues["idle"]["rate_limit"]) == (True, 0, None)


def test_pause_and_resume_a_queue(api, broker):
    assert ok(api.post("/api/v1/queues/mail/pause")) == {"queue": "mail", "paused": True}
    assert broker.queue_paused("mail")
    assert ok(api.post("/api/v1/queues/mail/resume")) == {"queue": "mail", "paused": False}
    assert not broker.queue_paused("mail")


def test_set_queue_policy(api, broker):
    assert ok(api.put("/api/v1/queues/mail/policy", {"policy": "lifo"})) == {"queue": "mail", "policy": "lifo"}
    assert broker.queue_policy("mail") == "lifo"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/api/v1/queues/-bad/pause", None, "queue"),
        ("post", "/api/v1/queues/mail/freeze", None, "action"),
        ("post", "/api/v1/queues/mail/pause", {"why": "x"}, "why"),
        ("put", "/api/v1/queues/mail/policy", {"policy": "oldest"}, "policy"),
        ("put", "/api/v1/queues/mail/policy", {}, "policy"),
        ("put", "/api/v1/queues/mail/policy", {"policy": "fifo", "order": 1}, "order"),
        ("put", "/api/v1/queues/-bad/policy", {"policy": "fifo"}, "queue"),
    ],
)
def test_bad_queue_requests_are_400_and_change_nothing(api, method, path, body, field):
    before = state_of_everything()
    refused(getattr(api, method)(path, body), 400, "invalid_argument", field)
    assert state_of_everything() == before


# -- limits ------------------------------------------------------------------------------


def test_rate_and_concurrency_limits_set_list_and_delete(api, broker):
    assert ok(api.put("/api/v1/queues/mail/rate-limit", {"rate": 2.5, "burst": 5})) == {
        "queue": "mail",
        "rate": 2.5,
        "burst": 5,
    }
    assert ok(api.put("/api/v1/queues/push/rate-limit", {"rate": 1})) == {"queue": "push", "rate": 1.0, "burst": 1}
    assert ok(api.put("/api/v1/queues/mail/concurrency-limit", {"limit": 4})) == {"queue": "mail", "limit": 4}
    limits = ok(api.get("/api/v1/limits"))
    assert limits == {
        "rate_limits": [{"queue": "mail", "rate": 2.5, "burst": 5}, {"queue": "push", "rate": 1.0, "burst": 1}],
        "concurrency_limits": [{"queue": "mail", "limit": 4}],
    }
    assert api.delete("/api/v1/queues/mail/rate-limit").status_code == 204
    assert api.delete("/api/v1/queues/mail/concurrency-limit").status_code == 204
    assert api.delete("/api/v1/queues/never-limited/rate-limit").status_code == 204  # absent is fine
    assert ok(api.get("/api/v1/limits")) == {
        "rate_limits": [{"queue": "push", "rate": 1.0, "burst": 1}],
        "concurrency_limits": [],
    }


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("put", "/api/v1/queues/mail/rate-limit", {"rate": 0}, "rate"),
        ("put", "/api/v1/queues/mail/rate-limit", {"rate": "fast"}, "rate"),
        ("put", "/api/v1/queues/mail/rate-limit", {}, "rate"),
        ("put", "/api/v1/queues/mail/rate-limit", {"rate": 1, "burst": 0}, "burst"),
        ("put", "/api/v1/queues/mail/rate-limit", {"rate": 1, "burst": 1.5}, "burst"),
        ("put", "/api/v1/queues/mail/rate-limit", {"rate": 1, "per": "s"}, "per"),
        ("put", "/api/v1/queues/-x/rate-limit", {"rate": 1}, "queue"),
        ("delete", "/api/v1/queues/-x/rate-limit", None, "queue"),
        ("put", "/api/v1/queues/mail/concurrency-limit", {"limit": 0}, "limit"),
        ("put", "/api/v1/queues/mail/concurrency-limit", {"limit": "4"}, "limit"),
        ("put", "/api/v1/queues/mail/concurrency-limit", {"max": 4}, "max"),
        ("delete", "/api/v1/queues/-x/concurrency-limit", None, "queue"),
    ],
)
def test_bad_limits_are_400_naming_the_field_and_change_nothing(api, broker, method, path, body, field):
    broker.set_rate_limit("mail", 3, 1)
    before = state_of_everything()
    refused(getattr(api, method)(path, body), 400, "invalid_argument", field)
    assert state_of_everything() == before


# -- groups ------------------------------------------------------------------------------


def test_group_configs_set_list_and_delete(api, broker):
    body = ok(
        api.put("/api/v1/groups", {"queue": "digest", "group": "daily", "max_size": 10, "max_delay": "5m", "grace": 2})
    )
    assert body == {"queue": "digest", "group": "daily", "max_size": 10, "max_delay": 300.0, "grace": 2.0}
    ok(api.put("/api/v1/groups", {"queue": "digest"}))  # the queue-wide default
    enqueue(broker, queue="digest", group="daily")
    listed = ok(api.get("/api/v1/groups"))
    assert [(c["queue"], c["group"]) for c in listed["configs"]] == [("digest", ""), ("digest", "daily")]
    assert [(g["queue"], g["group"], g["count"]) for g in listed["groups"]] == [("digest", "daily", 1)]
    assert api.delete("/api/v1/groups?queue=digest&group=daily").status_code == 204
    assert api.delete("/api/v1/groups?queue=digest").status_code == 204
    assert GroupConfig.objects.count() == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("put", "/api/v1/groups", {}, "queue"),
        ("put", "/api/v1/groups", {"queue": "-x"}, "queue"),
        ("put", "/api/v1/groups", {"queue": "q", "group": 5}, "group"),
        ("put", "/api/v1/groups", {"queue": "q", "group": {}}, "group"),
        ("put", "/api/v1/groups", {"queue": "q", "max_size": "big"}, "max_size"),
        ("put", "/api/v1/groups", {"queue": "q", "max_size": 0}, "max_size"),
        ("put", "/api/v1/groups", {"queue": "q", "max_delay": "soon"}, "max_delay"),
        ("put", "/api/v1/groups", {"queue": "q", "grace": 0}, "grace"),
        ("put", "/api/v1/groups", {"queue": "q", "size": 1}, "size"),
        ("delete", "/api/v1/groups", None, "queue"),
        ("delete", "/api/v1/groups?queue=-x", None, "queue"),
    ],
)
def test_bad_group_configs_are_400_and_change_nothing(api, broker, method, path, body, field):
    broker.set_group_config("q", "g", max_size=3)
    before = list(GroupConfig.objects.values())
    refused(getattr(api, method)(path, body), 400, "invalid_argument", field)
    assert list(GroupConfig.objects.values()) == before


# -- cron --------------------------------------------------------------------------------


def test_cron_create_read_list_replace_pause_resume_delete(api):
    made = ok(api.post("/api/v1/cron", {"id": "nightly", "spec": "0 3 * * *", "task_type": "report", "queue": "ops",
                                        "json": {"full": True}, "options": {"priority": 8, "timeout": "10m"}}))  # fmt: skip
    assert (made["id"], made["spec"], made["task_type"], made["queue"], made["json"]) == (
        "nightly",
        "0 3 * * *",
        "report",
        "ops",
        {"full": True},
    )
    assert made["options"] == {"priority": 8, "timeout": 600.0}
    assert made["paused"] is False
    assert datetime.fromisoformat(made["next_run_at"]).hour == 3
    assert ok(api.get("/api/v1/cron/nightly")) == made
    assert [e["id"] for e in ok(api.get("/api/v1/cron"))["entries"]] == ["nightly"]
    replaced = ok(api.put("/api/v1/cron/nightly", {"spec": "@hourly", "task_type": "report2"}))
    assert (replaced["spec"], replaced["task_type"], replaced["queue"]) == ("@hourly", "report2", "default")
    assert ok(api.post("/api/v1/cron/nightly/pause"))["paused"] is True
    assert CronEntry.objects.get(id="nightly").paused
    assert ok(api.post("/api/v1/cron/nightly/resume"))["paused"] is False
    assert api.delete("/api/v1/cron/nightly").status_code == 204
    assert api.delete("/api/v1/cron/nightly").status_code == 204  # absent is fine
    assert CronEntry.objects.count() == 0


def test_cron_paused_must_be_a_boolean_not_a_truthy_string(api):
    refused(
        api.post("/api/v1/cron", {"id": "c", "spec": "@daily", "task_type": "t", "paused": "false"}),
        400,
        "invalid_argument",
        "paused",
    )
    assert CronEntry.objects.count() == 0


@pytest.mark.parametrize(
    "method,path",
    [("get", "/api/v1/cron/nope"), ("post", "/api/v1/cron/nope/pause"), ("post", "/api/v1/cron/nope/resume")],
)
def test_unknown_cron_entry_is_404(api, method, path):
    refused(getattr(api, method)(path), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/api/v1/cron", {"id": "c", "spec": "every day", "task_type": "t"}, "spec"),
        ("post", "/api/v1/cron", {"id": "c", "spec": "@daily"}, "task_type"),
        ("post", "/api/v1/cron", {"spec": "@daily", "task_type": "t"}, "id"),
        (
            "post",
            "/api/v1/cron",
            {"id": "c", "spec": "@daily", "task_type": "t", "timezone": "Mars/Olympus"},
            "timezone",
        ),
        ("post", "/api/v1/cron", {"id": "c", "spec": "@daily", "task_type": "t", "options": [1]}, "options"),
        (
            "post",
            "/api/v1/cron",
            {"id": "c", "spec": "@daily", "task_type": "t", "options": {"colour": 1}},
            "options.colour",
        ),
        ("post", "/api/v1/cron", {"id": "c", "spec": "@daily", "task_type": "t", "queue": "-q"}, "queue"),
        ("post", "/api/v1/cron", {"id": "c", "spec": "@daily", "task_type": "t", "every": "day"}, "every"),
        ("put", "/api/v1/cron/c", {"id": "other", "spec": "@daily", "task_type": "t"}, "id"),
        ("post", "/api/v1/cron/c/stop", None, "action"),
        ("delete", "/api/v1/cron/" + "x" * 101, None, "entry_id"),
    ],
)
def test_bad_cron_requests_are_400_and_change_nothing(api, method, path, body, field):
    ok(api.post("/api/v1/cron", {"id": "c", "spec": "@daily", "task_type": "t"}))
    before = state_of_everything()
    refused(getattr(api, method)(path, body), 400, "invalid_argument", field)
    assert state_of_everything() == before


# -- webhooks ----------------------------------------------------------------------------


def register(api, name="hooks", **fields):
    body = {
        "name": name,
        "url": "https://hooks.example.com/tasks",
        "queues": {"email": 2},
        "secrets": [SECRET, OLD_SECRET],
        **fields,
    }
    return ok(api.post("/api/v1/webhooks", body))


def test_webhook_create_read_list_replace_pause_resume_delete(api):
    made = register(api, concurrency=4, batch_types=["digest"], request_timeout="20s")
    assert made["name"] == "hooks"
    assert (made["queues"], made["concurrency"], made["batch_types"], made["request_timeout"]) == (
        {"email": 2},
        4,
        ["digest"],
        20.0,
    )
    assert made["secret_count"] == 2
    assert ok(api.get("/api/v1/webhooks/hooks")) == made
    assert [w["name"] for w in ok(api.get("/api/v1/webhooks"))["webhooks"]] == ["hooks"]
    replaced = ok(
        api.put(
            "/api/v1/webhooks/hooks", {"url": "http://other.example.com/", "queues": {"sms": 1}, "secret": "new-one"}
        )
    )
    assert (replaced["url"], replaced["queues"], replaced["concurrency"], replaced["secret_count"]) == (
        "http://other.example.com/",
        {"sms": 1},
        10,
        1,
    )
    assert WebhookRegistration.objects.get(name="hooks").secrets == ["new-one"]
    assert ok(api.post("/api/v1/webhooks/hooks/pause"))["paused"] is True
    assert ok(api.post("/api/v1/webhooks/hooks/resume"))["paused"] is False
    assert api.delete("/api/v1/webhooks/hooks").status_code == 204
    assert api.delete("/api/v1/webhooks/hooks").status_code == 204
    assert WebhookRegistration.objects.count() == 0


def test_webhook_secrets_never_appear_in_any_rest_output(api):
    outputs = [register(api)]
    WebhookStatus.objects.create(name="hooks", node_id="n1", breaker="open", last_error="HTTP 500", inflight=1,
                                 recent=[{"outcome": "error"}], updated_at=datetime.now(UTC))  # fmt: skip
    outputs.append(ok(api.get("/api/v1/webhooks/hooks")))
    assert outputs[-1]["status"]["breaker"] == "open"
    outputs.append(ok(api.get("/api/v1/webhooks")))
    outputs.append(ok(api.post("/api/v1/webhooks/hooks/pause")))
    outputs.append(
        ok(
            api.put(
                "/api/v1/webhooks/hooks", {"url": "https://x.example.com/", "queues": {"q": 1}, "secrets": [SECRET]}
            )
        )
    )
    # Refusals must not echo a secret back either.
    too_many = {
        "name": "h2",
        "url": "https://x.example.com/",
        "queues": {"q": 1},
        "secrets": [SECRET, OLD_SECRET, "third"],
    }
    outputs.append(refused(api.post("/api/v1/webhooks", too_many), 400, "invalid_argument", "secrets"))
    too_long = {"name": "h2", "url": "https://x.example.com/", "queues": {"q": 1}, "secrets": [SECRET * 20]}
    outputs.append(refused(api.post("/api/v1/webhooks", too_long), 400, "invalid_argument", "secrets[0]"))
    for output in outputs:
        text = str(output)
        assert SECRET not in text and OLD_SECRET not in text, output
        assert "secrets" not in (output if isinstance(output, dict) else {})


def test_webhook_secret_and_secrets_together_are_refused(api):
    body = {"name": "h", "url": "https://x.example.com/", "queues": {"q": 1}, "secrets": ["a"], "secret": "b"}
    refused(api.post("/api/v1/webhooks", body), 400, "invalid_argument", "secret")
    assert WebhookRegistration.objects.count() == 0


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/api/v1/webhooks/nope"),
        ("post", "/api/v1/webhooks/nope/pause"),
        ("post", "/api/v1/webhooks/nope/resume"),
    ],
)
def test_unknown_webhook_is_404(api, method, path):
    refused(getattr(api, method)(path), 404, "not_found")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "ftp://x.example.com/"}, "url"),
        ({"url": "https://user:pw@x.example.com/"}, "url"),
        ({"queues": {}}, "queues"),
        ({"queues": {"-bad": 1}}, "queues"),
        ({"queues": {"q": 0}}, "queues.q"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": "10"}, "concurrency"),
        ({"secrets": "abc"}, "secrets"),
        ({"batch_types": "digest"}, "batch_types"),
        ({"request_timeout": "whenever"}, "request_timeout"),
        ({"paused": "yes"}, "paused"),
        ({"name": "bad name"}, "name"),
        ({"retries": 3}, "retries"),
    ],
)
def test_bad_webhook_registrations_are_400_and_change_nothing(api, fields, field):
    register(api)
    before = state_of_everything()
    body = {"name": "hooks", "url": "https://hooks.example.com/", "queues": {"q": 1}, **fields}
    refused(api.post("/api/v1/webhooks", body), 400, "invalid_argument", field)
    assert state_of_everything() == before


def test_webhook_put_with_another_name_in_the_body_is_refused(api):
    register(api)
    before = state_of_everything()
    refused(
        api.put("/api/v1/webhooks/hooks", {"name": "other", "url": "https://x.example.com/", "queues": {"q": 1}}),
        400,
        "invalid_argument",
        "name",
    )
    refused(api.post("/api/v1/webhooks/hooks/stop"), 400, "invalid_argument", "action")
    refused(api.delete("/api/v1/webhooks/" + "w" * 101), 400, "invalid_argument", "name")
    assert state_of_everything() == before


# -- workers, cluster, info --------------------------------------------------------------


def test_workers_and_cluster_show_nodes_and_their_sessions(api):
    now = datetime.now(UTC)
    cluster.register_node("node-a", "10.0.0.1", 8080, 42, "0.1.0", now)
    cluster.add_session(
        "node-a",
        "sess-1",
        now,
        queues={"email": 1},
        concurrency=8,
        labels={"zone": "a"},
        sdk_version="0.1.0",
        remote="10.0.0.9",
    )
    workers = ok(api.get("/api/v1/workers"))["workers"]
    assert [(w["id"], w["node"], w["queues"], w["concurrency"], w["labels"]) for w in workers] == [
        ("sess-1", "node-a", {"email": 1}, 8, {"zone": "a"})
    ]
    nodes = ok(api.get("/api/v1/cluster"))["nodes"]
    assert [(n["id"], n["host"], n["port"], n["pid"]) for n in nodes] == [("node-a", "10.0.0.1", 8080, 42)]
    assert [s["id"] for s in nodes[0]["sessions"]] == ["sess-1"]


def test_info_names_version_driver_and_time(api):
    body = ok(api.get("/api/v1/info"))
    assert body["driver"] == "sqlite"
    assert body["version"]
    assert abs((datetime.fromisoformat(body["time"]) - datetime.now(UTC)).total_seconds()) < 60


def test_queue_rows_are_not_created_by_reads(api):
    ok(api.get("/api/v1/queues"))
    ok(api.get("/api/v1/limits"))
    assert Queue.objects.count() == 0
