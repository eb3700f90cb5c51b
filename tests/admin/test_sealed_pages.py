"""The dashboard and the Django admin on sealed rows: plaintext, "encrypted (key id ...)", or why not."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client, override_settings

from conveyor.broker import TaskSpec, get_broker
from conveyor.sdk import AESGCM
from conveyor.sdk.encryption import MARKER_KEY, seal_request
from tests.admin.conftest import task_page

pytestmark = pytest.mark.django_db(transaction=True)

K1 = "k1:" + base64.b64encode(bytes([1]) * 32).decode()
K2 = "k2:" + base64.b64encode(bytes([2]) * 32).decode()
MARKER = "MARKER-page-77"


def test_a_row_sealed_at_rest_shows_its_plaintext_and_its_key(staff: Client) -> None:
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K1}):
        task = get_broker().enqueue(TaskSpec(type="t", payload=json.dumps({"card": MARKER}).encode()))
        html = task_page(staff, task.id)
        admin = staff.get("/admin/conveyor/task/", {"q": task.id}).content.decode()
    assert MARKER in html and "sealed at rest (key id k1)" in html
    assert task.id in admin


def test_a_payload_sealed_end_to_end_shows_as_encrypted_with_its_key_id(staff: Client) -> None:
    body = seal_request({"type": "t", "json": {"card": MARKER}}, AESGCM({"e2e-key": bytes([3]) * 32}))
    task = get_broker().enqueue(
        TaskSpec(type="t", payload=base64.b64decode(body["payload"]), metadata=body["metadata"])
    )
    assert task.metadata[MARKER_KEY] == "1"
    html = task_page(staff, task.id)
    assert "encrypted (key id <code>e2e-key</code>)" in html and MARKER not in html


def test_a_row_this_node_cannot_open_says_why_and_shows_no_ciphertext(staff: Client) -> None:
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K1}):
        task = get_broker().enqueue(TaskSpec(type="t", payload=json.dumps({"card": MARKER}).encode()))
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K2}):
        html = task_page(staff, task.id)
    assert "Cannot be shown:" in html and "sealed under key &#x27;k1&#x27;" in html
