"""CONVEYOR_API_TOKENS: plain and scoped tokens, how they are read and what each grants."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from conveyor.checks import check_conveyor_settings
from conveyor.conf import coerce
from conveyor.exceptions import MissingScope, QueueNotAllowed, Unauthenticated
from conveyor.tokens import SCOPES, authenticate, find_token, parse_tokens, require_queues, require_scope


def test_a_plain_token_has_every_scope_on_every_queue():
    (token,) = parse_tokens(["legacy"])
    assert token.scopes == frozenset(SCOPES) and token.queues is None
    assert all(token.grants(s) for s in SCOPES) and token.serves("anything")


def test_a_scoped_token_grants_its_scopes_and_admin_implies_read():
    produce, admin = parse_tokens([{"token": "p", "scopes": ["produce"]}, {"token": "a", "scopes": ["admin"]}])
    assert [produce.grants(s) for s in SCOPES] == [True, False, False, False]
    assert [admin.grants(s) for s in SCOPES] == [False, False, True, True]


def test_queues_limit_a_producer_or_worker_token():
    (token,) = parse_tokens([{"token": "w", "scopes": ["produce", "consume"], "queues": ["email", "sms"]}])
    assert token.serves("email") and not token.serves("billing")
    require_queues(token, ["email", "sms"], "serve")
    with pytest.raises(QueueNotAllowed, match="may only serve queues email, sms, not 'billing'"):
        require_queues(token, ["email", "billing"], "serve")


def test_the_environment_takes_comma_separated_plain_tokens_or_a_json_list():
    assert coerce("API_TOKENS", " a , b,,") == ["a", "b"]
    entries = [{"token": "p", "scopes": ["produce"]}, "legacy"]
    assert coerce("API_TOKENS", json.dumps(entries)) == entries
    with pytest.raises(ValueError, match="list of tokens"):
        coerce("API_TOKENS", {"token": "x"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("", r"API_TOKENS\[0\]: must be a non-empty string"),
        ("has space", "cannot contain spaces"),
        (3, "must be a token string or an object"),
        ({"token": "x"}, r"API_TOKENS\[0\]\.scopes: must be a non-empty list"),
        ({"token": "x", "scopes": []}, "scopes: must be a non-empty list"),
        ({"token": "x", "scopes": ["write"]}, "unknown scope 'write' \\(known: produce, consume, read, admin\\)"),
        ({"token": "x", "scopes": ["produce"], "queue": ["q"]}, "unknown field 'queue'"),
        ({"token": "x", "scopes": ["produce"], "queues": ["-bad"]}, "'-bad' is not a queue name"),
        ({"token": "x", "scopes": ["admin"], "queues": ["q"]}, "queues limit only the produce and consume scopes"),
        ({"token": "", "scopes": ["read"]}, r"API_TOKENS\[0\]\.token: must be a non-empty string"),
        ({"token": "x", "scopes": ["read"], "name": 5}, "name: must be a string"),
    ],
)
def test_a_wrong_entry_is_named_with_what_is_wrong(entry, message):
    with pytest.raises(ValueError, match=message):
        parse_tokens([entry])


def test_a_token_listed_twice_is_refused():
    with pytest.raises(ValueError, match=r"API_TOKENS\[1\]: the same token is listed twice"):
        parse_tokens(["t", {"token": "t", "scopes": ["read"]}])


def test_the_presented_token_is_found_with_its_scopes():
    with override_settings(CONVEYOR={"API_TOKENS": ["legacy", {"token": "r", "scopes": ["read"], "name": "grafana"}]}):
        assert find_token("r").name == "grafana"
        assert find_token("legacy").scopes == frozenset(SCOPES)
        assert find_token("nope") is None and find_token("") is None
        assert authenticate("Bearer r").name == "grafana"
        for header in ("", "Bearer", "Bearer nope", "Basic cjo="):
            with pytest.raises(Unauthenticated):
                authenticate(header)
    assert authenticate("Bearer anything") is None  # no tokens: auth is off


def test_require_scope_names_the_missing_scope_and_the_ones_held():
    (token,) = parse_tokens([{"token": "p", "scopes": ["produce"]}])
    require_scope(token, "read", "produce")
    require_scope(None, "admin")  # auth off, or a staff session: not a token
    with pytest.raises(MissingScope) as caught:
        require_scope(token, "admin")
    assert caught.value.message == "this token lacks the 'admin' scope (its scopes: produce)"
    assert caught.value.details == {"scope": "admin"}


def test_the_system_check_names_a_wrong_token_entry():
    with override_settings(CONVEYOR={"API_TOKENS": [{"token": "x", "scopes": ["nope"]}]}):
        (error,) = check_conveyor_settings()
    assert error.id == "conveyor.E005" and "API_TOKENS[0].scopes: unknown scope 'nope'" in error.msg
    with override_settings(CONVEYOR={"API_TOKENS": ["ok", {"token": "r", "scopes": ["read"]}]}):
        assert check_conveyor_settings() == []
