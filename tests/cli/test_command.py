"""What every verb shares: --json placement, usage errors."""

from __future__ import annotations

import pytest

from conveyor.broker import TaskSpec
from tests.cli.support import fails, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_json_flag_works_before_the_group_and_after_the_verb(broker):
    broker.enqueue(TaskSpec(type="a", id="t1"))

    assert run("--json", "tasks", "get", "t1").json() == run("tasks", "get", "t1", "--json").json()


def test_missing_verb_is_a_one_line_usage_error():
    assert fails("tasks") == "Error: the following arguments are required: <verb>"


def test_unknown_verb_is_a_one_line_usage_error():
    assert fails("tasks", "explode").startswith("Error: argument <verb>: invalid choice: 'explode'")
