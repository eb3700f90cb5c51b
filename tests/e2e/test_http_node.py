"""The node's HTTP side as a browser or a form meets it (real conveyord processes)."""

from __future__ import annotations

import re

import pytest


@pytest.mark.parametrize("mode", ["dev"], indirect=True)
def test_a_form_post_reaches_django_whole(cluster):
    # The node has Twisted skip its own parsing of form bodies (Daphne hands
    # the body on as it came): Django must still get every field. A body lost
    # on the way would fail the CSRF check (403); a whole one reaches the
    # login form, which answers 200 and names the failed login.
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
