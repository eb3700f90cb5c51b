"""Every enqueue validation rule: bad input names its field and stores nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from conveyor.broker import Dependency, RetrySpec, TaskSpec
from conveyor.exceptions import InvalidArgument

MIB = 1024 * 1024


def spec(**kw) -> TaskSpec:
    kw.setdefault("type", "t")
    return TaskSpec(**kw)


def assert_rejected(broker, task_spec: TaskSpec, field: str) -> InvalidArgument:
    """Enqueue must raise InvalidArgument naming *field* and leave the table as it was."""
    broker.enqueue(spec(id="bystander"))
    before = broker.tasks.count()
    wakes = len(broker.hooks.wakes)
    with pytest.raises(InvalidArgument) as info:
        broker.enqueue(task_spec)
    assert info.value.field == field
    assert broker.tasks.count() == before
    assert len(broker.hooks.wakes) == wakes
    return info.value


def test_missing_type_is_rejected(broker):
    assert_rejected(broker, TaskSpec(type=""), "type")


def test_type_with_control_characters_is_rejected(broker):
    assert_rejected(broker, spec(type="a\x00b"), "type")


@pytest.mark.parametrize("queue", ["-lead", "slash/q"])
def test_queue_name_outside_allowed_pattern_is_rejected(broker, queue):
    assert_rejected(broker, spec(queue=queue), "queue")


def test_queue_name_with_trailing_newline_is_rejected(broker):
    assert_rejected(broker, spec(queue="default\n"), "queue")


def test_queue_name_longer_than_100_chars_is_rejected(broker):
    assert_rejected(broker, spec(queue="q" * 101), "queue")


def test_empty_queue_name_is_rejected(broker):
    assert_rejected(broker, spec(queue=""), "queue")


@pytest.mark.parametrize("task_id", ["has space", "x" * 101, "trailing\n", "a/b"])
def test_malformed_task_id_is_rejected(broker, task_id):
    assert_rejected(broker, spec(id=task_id), "id")


@pytest.mark.parametrize("task_id", ["batch", "tx", "actions"])
def test_ids_naming_api_routes_are_reserved(broker, task_id):
    assert_rejected(broker, spec(id=task_id), "id")


@pytest.mark.parametrize("priority", [-1, 10, True])
def test_priority_outside_1_to_9_is_rejected(broker, priority):
    assert_rejected(broker, spec(priority=priority), "priority")


def test_negative_max_retry_is_rejected(broker):
    assert_rejected(broker, spec(max_retry=-1), "max_retry")


def test_payload_over_one_mib_is_rejected(broker):
    assert_rejected(broker, spec(payload=b"x" * (MIB + 1)), "payload")


def test_payload_that_is_not_bytes_is_rejected(broker):
    assert_rejected(broker, spec(payload="text"), "payload")


def test_metadata_with_non_string_value_is_rejected(broker):
    assert_rejected(broker, spec(metadata={"k": 1}), "metadata.k")


def test_metadata_with_non_string_key_is_rejected(broker):
    assert_rejected(broker, spec(metadata={1: "v"}), "metadata")


def test_process_at_with_process_in_is_rejected(broker, clock):
    assert_rejected(broker, spec(process_at=clock.now() + timedelta(seconds=5), process_in=5), "process_at")


def test_process_at_without_time_zone_is_rejected(broker):
    assert_rejected(broker, spec(process_at=datetime(2030, 1, 1)), "process_at")


def test_negative_process_in_is_rejected(broker):
    assert_rejected(broker, spec(process_in=-1), "process_in")


def test_expires_at_with_expires_in_is_rejected(broker, clock):
    assert_rejected(broker, spec(expires_at=clock.now() + timedelta(seconds=5), expires_in=5), "expires_at")


def test_expires_at_not_in_the_future_is_rejected(broker, clock):
    assert_rejected(broker, spec(expires_at=clock.now()), "expires_at")


def test_non_positive_expires_in_is_rejected(broker):
    assert_rejected(broker, spec(expires_in=0), "expires_in")


def test_deadline_not_in_the_future_is_rejected(broker, clock):
    assert_rejected(broker, spec(deadline=clock.now()), "deadline")


def test_unique_ttl_without_key_is_rejected(broker):
    assert_rejected(broker, spec(unique_ttl=60), "unique_ttl")


def test_non_positive_unique_ttl_is_rejected(broker):
    assert_rejected(broker, spec(unique_key="k", unique_ttl=0), "unique_ttl")


@pytest.mark.parametrize("delay", ["process_in", "process_at"])
def test_group_with_delay_is_rejected(broker, clock, delay):
    when = {"process_in": {"process_in": 10}, "process_at": {"process_at": clock.now() + timedelta(seconds=10)}}
    assert_rejected(broker, spec(group="g", **when[delay]), "group")


def test_group_with_concurrency_key_is_rejected(broker):
    assert_rejected(broker, spec(group="g", concurrency_key="k"), "group")


def test_more_than_1000_dependencies_is_rejected(broker):
    deps = [Dependency(f"d{i}") for i in range(1001)]
    assert_rejected(broker, spec(depends_on=deps), "depends_on")


def test_unknown_on_failure_policy_is_rejected(broker):
    broker.enqueue(spec(id="up"))
    assert_rejected(broker, spec(depends_on=[Dependency("up", "ignore")]), "depends_on[0].on_failure")


def test_malformed_dependency_id_is_rejected(broker):
    assert_rejected(broker, spec(depends_on=[Dependency("bad id")]), "depends_on[0].task_id")


def test_unknown_retry_policy_kind_is_rejected(broker):
    assert_rejected(broker, spec(retry_policy=RetrySpec(kind="quadratic")), "retry_policy.kind")


def test_non_positive_retry_base_is_rejected(broker):
    assert_rejected(broker, spec(retry_policy=RetrySpec(base=0)), "retry_policy.base")


def test_non_positive_timeout_is_rejected(broker):
    assert_rejected(broker, spec(timeout=0), "timeout")


def test_negative_retention_is_rejected(broker):
    assert_rejected(broker, spec(retention=-1), "retention")


CENTURY_AND_A_DAY = 100 * 365.25 * 86400 + 86400


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"process_in": CENTURY_AND_A_DAY}, "process_in"),
        ({"process_in": 1e300}, "process_in"),
        ({"expires_in": CENTURY_AND_A_DAY}, "expires_in"),
        ({"unique_key": "k", "unique_ttl": CENTURY_AND_A_DAY}, "unique_ttl"),
        ({"retention": CENTURY_AND_A_DAY}, "retention"),
        ({"timeout": CENTURY_AND_A_DAY}, "timeout"),
        ({"retry_policy": RetrySpec(cap=CENTURY_AND_A_DAY)}, "retry_policy.cap"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_duration_over_100_years_is_rejected(broker, kw, field):
    assert_rejected(broker, spec(**kw), field)


def test_rejected_repeat_of_existing_id_leaves_stored_task_alone(broker):
    broker.enqueue(spec(id="same", payload=b"1"))
    with pytest.raises(InvalidArgument) as info:
        broker.enqueue(spec(id="same", priority=42))
    assert info.value.field == "priority"
    assert broker.tasks.count() == 1
    assert bytes(broker.get_task("same").payload) == b"1"
