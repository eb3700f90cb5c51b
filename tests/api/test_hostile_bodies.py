"""Hostile bodies the fuzz pass (bench/fuzz.py) found answered with a 500 or an HTML page.

Each is a 4xx in the JSON error shape and stores nothing.
"""

from __future__ import annotations

import pytest

from conveyor.models import CronEntry, Task
from tests.api.conftest import refused

pytestmark = pytest.mark.django_db

# 1e400 is past a double's range: Python's JSON reader makes it inf, which
# json.dumps would write back as Infinity (not JSON).
OUT_OF_RANGE = [
    pytest.param("/api/v1/tasks", '{"type": "t", "json": {"a": 1e400}}', "json", id="enqueue"),
    pytest.param("/api/v1/tasks/tx", '{"tasks": [{"type": "t", "json": [-1e400]}]}', "json", id="tx"),
    pytest.param("/api/v1/cron", '{"id": "c1", "spec": "@daily", "task_type": "t", "json": 1e400}', "json",
                 id="cron"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "raw", "field"), OUT_OF_RANGE)
def test_a_json_payload_with_a_number_out_of_range_is_a_400_naming_json(api, path, raw, field):
    body = refused(api.post(path, raw=raw), 400, "invalid_argument", field)

    assert "out of range" in body["message"]
    assert Task.objects.count() == 0 and CronEntry.objects.count() == 0


def test_a_cron_entry_whose_payload_is_out_of_range_is_refused_on_put_too(api):
    raw = '{"spec": "@daily", "task_type": "t", "json": {"n": 1e400}}'

    refused(api.put("/api/v1/cron/c1", raw=raw), 400, "invalid_argument", "json")
    assert CronEntry.objects.count() == 0


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/api/v1/tasks/bulk", '{"action": "cancel", "filter": {"\\ud800": "x"}}'),
        ("/api/v1/tasks", '{"type": "t", "\\udc00x": 1}'),
        ("/api/v1/queues/q/pause", '{"\\ud800": 1}'),
    ],
)
def test_an_error_that_echoes_a_lone_surrogate_is_json_with_the_surrogate_escaped(api, path, raw):
    response = api.post(path, raw=raw)

    body = refused(response, 400, "invalid_argument")
    assert response["Content-Type"].startswith("application/json")
    assert "\\ud800" in body["message"] or "\\udc00" in body["message"], body


def test_a_body_over_djangos_upload_limit_is_a_413_in_the_json_error_shape(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = api.put("/api/v1/queues/q/policy", raw='{"policy": "' + "x" * 5000 + '"}')

    body = refused(response, 413, "invalid_argument", "")
    assert "too large" in body["message"] and "1000 bytes" in body["message"]


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_a_change_sent_to_no_endpoint_is_the_json_404_not_djangos_csrf_page(method):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)  # as a real request meets CsrfViewMiddleware

    response = getattr(client, method)("/api/v1/no-such-thing%00", data="{}", content_type="application/json")

    refused(response, 404, "not_found")
    assert response["Content-Type"].startswith("application/json")
