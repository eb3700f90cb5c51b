"""Bulk actions on a filter over REST: count, start, follow; refusals name the field."""

from __future__ import annotations

import pytest

from conveyor.models import BulkJob
from tests.api.conftest import enqueue, ok, refused

pytestmark = pytest.mark.django_db(transaction=True)


def test_count_then_start_then_follow_a_bulk_cancel(api, broker):
    for _ in range(3):
        enqueue(broker, queue="bq", metadata={"t": "x"})
    enqueue(broker, queue="bq")

    assert ok(api.get("/api/v1/tasks/count", data={"action": "cancel", "where": "metadata.t = x"})) == {"count": 3}
    job = ok(api.post("/api/v1/tasks/bulk", {"action": "cancel", "filter": {"where": "metadata.t = x"}}), 202)
    assert (job["state"], job["total"], job["done"]) == ("running", 3, 0)
    broker.run_bulk_batch(job["id"])

    done = ok(api.get(f"/api/v1/tasks/bulk/{job['id']}"))
    assert (done["state"], done["done"], done["skipped"], done["percent"]) == ("done", 3, 0, 100)
    assert [j["id"] for j in ok(api.get("/api/v1/tasks/bulk"))["jobs"]] == [job["id"]]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"action": "explode", "filter": {"queue": "q"}}, "action"),
        ({"action": "cancel", "filter": {}}, "filter"),
        ({"action": "cancel", "filter": {"colour": "red"}}, "filter.colour"),
        ({"action": "cancel", "filter": {"where": "nope"}}, "where"),
        ({"action": "cancel", "filter": "queue=q"}, "filter"),
        ({"action": "cancel", "filter": {"queue": 5}}, "queue"),
    ],
)
def test_a_bad_bulk_request_is_400_naming_the_field_and_starts_nothing(api, body, field):
    refused(api.post("/api/v1/tasks/bulk", body), 400, "invalid_argument", field)
    assert not BulkJob.objects.exists()


def test_an_unknown_bulk_job_is_404(api):
    refused(api.get("/api/v1/tasks/bulk/bulk-nope"), 404, "not_found")


def test_read_only_mode_refuses_a_bulk_job(read_only, api, broker):
    enqueue(broker, queue="bq")
    response = api.post("/api/v1/tasks/bulk", {"action": "cancel", "filter": {"queue": "bq"}})
    assert response.status_code == 403
    assert not BulkJob.objects.exists()
