"""``conveyor tokens list|new``: the configured API tokens (never shown) and new entries to add."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from conveyor.tokens import parse_tokens
from tests.cli.support import fails, run, table

TOKENS = ["legacy-secret", {"token": "producer-secret", "scopes": ["produce"], "queues": ["email"], "name": "signup"}]


def test_list_shows_name_fingerprint_scopes_and_queues_but_never_a_token():
    with override_settings(CONVEYOR={"API_TOKENS": TOKENS}):
        result = run("tokens", "list")
        data = run("--json", "tokens", "list").json()
    legacy, producer = parse_tokens(TOKENS)
    assert table(result) == [
        ["NAME", "FINGERPRINT", "SCOPES", "QUEUES"],
        ["-", legacy.fingerprint, "produce,consume,read,admin", "(all)"],
        ["signup", producer.fingerprint, "produce", "email"],
    ]
    assert data[1] == {
        "name": "signup",
        "fingerprint": producer.fingerprint,
        "scopes": ["produce"],
        "queues": ["email"],
    }
    assert "secret" not in result.out + json.dumps(data)


def test_list_without_tokens_says_auth_is_off():
    result = run("tokens", "list")
    assert result.out.strip() == "(none)" and "auth is off" in result.err


def test_new_prints_a_random_token_and_an_entry_the_setting_accepts():
    first = run("--json", "tokens", "new", "--scope", "produce,consume", "--queue", "email", "--name", "mailer").json()
    second = run("--json", "tokens", "new", "--scope", "read").json()
    assert first["scopes"] == ["produce", "consume"] and first["queues"] == ["email"] and first["name"] == "mailer"
    assert len(first["token"]) >= 40 and first["token"] != second["token"]
    (token,) = parse_tokens([first])
    assert token.grants("consume") and token.serves("email") and not token.serves("sms")
    human = run("tokens", "new", "--scope", "admin")
    assert human.lines()[0].startswith("token ") and "CONVEYOR_API_TOKENS" in human.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scope", "write"], "--scope: unknown scope 'write'"),
        (["--scope", "admin", "--queue", "email"], "--queue: queues limit only the produce and consume scopes"),
        (["--scope", "produce", "--queue=a b"], "--queue: 'a b' is not a queue name"),
    ],
)
def test_new_refuses_a_wrong_scope_or_queue_in_one_line(argv, message):
    assert message in fails("tokens", "new", *argv)
