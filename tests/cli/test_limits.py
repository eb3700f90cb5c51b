"""``conveyor ratelimit set|rm|ls`` and ``conveyor concurrency set|rm|ls``."""

from __future__ import annotations

import pytest

from tests.cli.support import fails, run, table

pytestmark = pytest.mark.django_db(transaction=True)


def test_ratelimit_set(broker):
    result = run("ratelimit", "set", "mail", "--rate", "2.5", "--burst", "10")

    assert result.out.strip() == "queue mail: at most 2.5 tasks/s, burst 10"
    limit = broker.rate_limit("mail")
    assert (limit.rate, limit.burst) == (2.5, 10)


def test_ratelimit_ls(broker):
    broker.set_rate_limit("mail", 5, 1)
    broker.set_rate_limit("billing", 0.5, 3)

    assert table(run("ratelimit", "ls")) == [
        ["QUEUE", "RATE", "BURST"],
        ["billing", "0.5/s", "3"],
        ["mail", "5/s", "1"],
    ]
    assert run("ratelimit", "ls", "--json").json() == {
        "rate_limits": [{"queue": "billing", "rate": 0.5, "burst": 3}, {"queue": "mail", "rate": 5.0, "burst": 1}]
    }


def test_ratelimit_rm(broker):
    broker.set_rate_limit("mail", 5, 1)

    assert run("ratelimit", "rm", "mail").out.strip() == "removed the rate limit of queue mail"
    assert broker.rate_limit("mail") is None
    assert run("ratelimit", "rm", "mail").out.strip() == "queue mail had no rate limit"


def test_ratelimit_bad_values_name_the_flag_and_change_nothing(broker):
    assert fails("ratelimit", "set", "mail", "--rate", "fast") == "--rate: 'fast' is not a number"
    assert fails("ratelimit", "set", "mail", "--rate", "0").startswith("--rate: must be a number of tasks per second")
    assert fails("ratelimit", "set", "mail", "--rate", "1", "--burst", "0") == "--burst: must be between 1 and 1000000"
    assert broker.rate_limits() == []


def test_concurrency_set(broker):
    result = run("concurrency", "set", "reports", "--max", "5")

    assert result.out.strip() == "queue reports: at most 5 active tasks per concurrency key"
    assert broker.concurrency_limit("reports").limit == 5


def test_concurrency_ls(broker):
    broker.set_concurrency_limit("reports", 5)

    assert table(run("concurrency", "ls")) == [["QUEUE", "MAX"], ["reports", "5"]]
    assert run("--json", "concurrency", "ls").json() == {"concurrency_limits": [{"queue": "reports", "limit": 5}]}


def test_concurrency_rm(broker):
    broker.set_concurrency_limit("reports", 5)

    assert run("concurrency", "rm", "reports").out.strip() == "removed the concurrency limit of queue reports"
    assert broker.concurrency_limits() == []


def test_concurrency_bad_max_names_the_flag(broker):
    assert fails("concurrency", "set", "reports", "--max", "0") == "--max: must be between 1 and 1000000"
    assert fails("concurrency", "set", "reports", "--max", "many") == "--max: 'many' is not an integer"
    assert broker.concurrency_limits() == []
