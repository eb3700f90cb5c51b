"""The node's HTTP side as a browser or a form meets it (real conveyord processes)."""

from __future__ import annotations

import http.client
import re
import statistics
import time
from urllib.parse import urlsplit

import pytest


@pytest.mark.parametrize("mode", ["dev"], indirect=True)
def test_a_form_post_reaches_django_whole(cluster):
    # Django must get every field of a form body as the browser sent it. A
    # body lost on the way would fail the CSRF check (403); a whole one
    # reaches the login form, which answers 200 and names the failed login.
    node = cluster.node()
    page = node.http.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)

    answer = node.http.post(
        "/admin/login/",
        data={"csrfmiddlewaretoken": token, "username": "nobody", "password": "wrong", "next": "/admin/"},
        headers={"Referer": f"{node.url}/admin/login/"},
    )

    assert answer.status_code == 200
    assert "Please enter the correct username and password" in answer.text
    assert 'value="nobody"' in answer.text  # the username field came through


@pytest.mark.parametrize("mode", ["dev"], indirect=True)
def test_answers_on_a_kept_alive_connection_come_without_a_delayed_ack_stall(cluster):
    # A response written in two pieces (head, then body) on a socket with
    # Nagle's algorithm on waits for the client's delayed ACK of the first
    # piece: ~40 ms on Linux, for every answer. The node's connections send
    # at once (TCP_NODELAY), so an answer comes in a few milliseconds. The
    # bound sits well under the stall and well over a loaded machine's time.
    node = cluster.node()
    url = urlsplit(node.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    times = []
    for _ in range(40):
        started = time.perf_counter()
        conn.request("POST", "/api/v1/tasks", '{"type": "e2e"}', {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 201 and response.read()
        times.append(time.perf_counter() - started)
    conn.close()
    assert statistics.median(times) < 0.025, times
