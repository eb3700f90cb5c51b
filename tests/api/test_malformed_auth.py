"""A malformed Authorization header is a wrong token: 401 in each surface's error shape, never a 500.

(Guards: the fuzz pass, bench/fuzz.py, found the Connect case a 500; see
tests/connect/test_headers.py for the header that is not UTF-8.)
"""

from __future__ import annotations

import json

import pytest

from conveyor.models import Task
from tests.api.conftest import TOKEN, Api, refused
from tests.connect.clients import post

pytestmark = pytest.mark.django_db(transaction=True)

MALFORMED = ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", f"Token {TOKEN}", f"Bearer {TOKEN} {TOKEN}",
             f"Bearer {TOKEN[:-1]}", "Bearer " + "x" * 10_000, "Bearer \u00ff\u00fe", "\u00e9"]  # fmt: skip


@pytest.mark.parametrize("header", MALFORMED)
@pytest.mark.parametrize(("method", "path"), [("get", "/api/v1/tasks"), ("post", "/api/v1/tasks/tx"),
                                              ("post", "/api/v1/queues/q/pause")])  # fmt: skip
def test_rest_answers_a_malformed_authorization_with_the_json_401(tokens, header, method, path):
    api = Api()
    body = {"tasks": [{"type": "x"}]} if path.endswith("/tx") else {}
    response = (
        api.get(path, HTTP_AUTHORIZATION=header) if method == "get" else api.post(path, body, HTTP_AUTHORIZATION=header)
    )

    refused(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="conveyor"'
    assert Task.objects.count() == 0


@pytest.mark.parametrize("header", MALFORMED)
def test_the_enqueue_fast_path_answers_a_malformed_authorization_with_the_json_401(tokens, header):
    response = post("/api/v1/tasks", json.dumps({"type": "x"}), authorization=header.encode("latin1"))

    assert response.status_code == 401, response.text
    assert response.json()["error"] == "unauthenticated"
    assert Task.objects.count() == 0


@pytest.mark.parametrize("header", MALFORMED)
def test_connect_answers_a_malformed_authorization_with_unauthenticated(tokens, header):
    response = post(
        "/conveyor.v1.TaskService/Enqueue", json.dumps({"type": "x"}), authorization=header.encode("latin1")
    )

    assert response.status_code == 401, response.text
    assert response.json()["code"] == "unauthenticated"
    assert Task.objects.count() == 0
