"""Headers the Connect runtime cannot read (found by bench/fuzz.py: each was a 500).

The runtime decodes every header as UTF-8. A header that is not UTF-8 is
answered before it runs: a bad ``Authorization`` like any wrong token
(``unauthenticated``; ignored on a node without tokens), another header
``invalid_argument``.
"""

from __future__ import annotations

import json

import pytest

from conveyor.models import Task
from tests.connect.clients import post
from tests.connect.conftest import refused

pytestmark = pytest.mark.django_db(transaction=True)

ENQUEUE = "/conveyor.v1.TaskService/Enqueue"
LATIN1 = b"Bearer \xff\xfe\xe9"


@pytest.mark.parametrize("path", [ENQUEUE, "/conveyor.v1.TaskService/GetTask", "/conveyor.v1.AdminService/ListQueues"])
def test_an_authorization_header_that_is_not_utf8_is_unauthenticated(tokens, path):
    response = post(path, json.dumps({"type": "t"} if path == ENQUEUE else {}), authorization=LATIN1)

    refused(response, 401, "unauthenticated")
    assert Task.objects.count() == 0


def test_an_authorization_header_that_is_not_utf8_is_ignored_without_tokens():
    response = post(ENQUEUE, json.dumps({"type": "t"}), authorization=LATIN1)

    assert response.status_code == 200, response.text
    assert Task.objects.count() == 1


def test_another_header_that_is_not_utf8_is_invalid_argument():
    response = post(ENQUEUE, json.dumps({"type": "t"}), **{"user-agent": b"curl \xff"})

    body = refused(response, 400, "invalid_argument")
    assert "user-agent" in body["message"]
    assert Task.objects.count() == 0
