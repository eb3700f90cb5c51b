"""Cron entries: upsert, listing, due entries, compare-and-set next run, firing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.broker.types import CronSpec
from conveyor.exceptions import InvalidArgument, NotFound
from conveyor.models import CronEntry
from conveyor.states import State
from tests.broker.factories import lease_one

START = datetime(2026, 1, 1, tzinfo=UTC)  # the fake clock's start


def cron_rows(broker):
    return [
        {k: (bytes(v) if isinstance(v, memoryview) else v) for k, v in row.items()}
        for row in CronEntry.objects.using(broker.db).order_by("id").values()
    ]


def test_upsert_stores_the_entry_with_its_next_run_after_now(broker, clock):
    clock.advance(7 * 60)  # 00:07

    entry = broker.upsert_cron_entry(
        CronSpec(id="nightly", spec="*/15 * * * *", task_type="report:build", queue="reports", payload=b'{"a":1}')
    )

    stored = broker.get_cron_entry("nightly")
    assert stored.next_run_at == entry.next_run_at == START + timedelta(minutes=15)
    assert (stored.task_type, stored.queue, bytes(stored.payload), stored.paused) == (
        "report:build",
        "reports",
        b'{"a":1}',
        False,
    )


def test_upsert_again_replaces_the_fields_and_resets_the_next_run(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="e", spec="0 * * * *", task_type="a", options={"priority": 7}))
    clock.advance(3 * 3600 + 60)  # 03:01, the 01:00 .. 03:00 slots were never fired

    broker.upsert_cron_entry(CronSpec(id="e", spec="30 * * * *", task_type="b"))

    stored = broker.get_cron_entry("e")
    assert stored.next_run_at == START + timedelta(hours=3, minutes=30)
    assert (stored.spec, stored.task_type, stored.options) == ("30 * * * *", "b", {})


def test_six_field_specs_take_seconds_first(broker, clock):
    entry = broker.upsert_cron_entry(CronSpec(id="fast", spec="*/20 * * * * *", task_type="tick"))
    hourly = broker.upsert_cron_entry(CronSpec(id="odd", spec="30 0 * * * *", task_type="tick"))

    assert entry.next_run_at == START + timedelta(seconds=20)
    assert hourly.next_run_at == START + timedelta(seconds=30)


def test_invalid_entries_are_rejected_and_nothing_changes(broker):
    broker.upsert_cron_entry(CronSpec(id="keep", spec="0 * * * *", task_type="a"))
    before = cron_rows(broker)
    bad = [
        (CronSpec(id="keep", spec="61 * * * *", task_type="a"), "spec"),
        (CronSpec(id="keep", spec="* * * *", task_type="a"), "spec"),
        (CronSpec(id="keep", spec="* * * * * * *", task_type="a"), "spec"),
        (CronSpec(id="keep", spec="", task_type="a"), "spec"),
        (CronSpec(id="new", spec="0 * * * *", task_type="a", timezone="Mars/Base"), "timezone"),
        (CronSpec(id="new", spec="0 * * * *", task_type="a", options={"delay": 5}), "options.delay"),
        (CronSpec(id="new", spec="0 * * * *", task_type="a", options={"priority": 12}), "priority"),
        (CronSpec(id="new", spec="0 * * * *", task_type="", queue="default"), "task_type"),
        (CronSpec(id="new", spec="0 * * * *", task_type="a", queue="bad queue"), "queue"),
        (CronSpec(id="bad id", spec="0 * * * *", task_type="a"), "id"),
    ]

    for spec, field in bad:
        with pytest.raises(InvalidArgument) as err:
            broker.upsert_cron_entry(spec)
        assert err.value.field == field, spec

    assert cron_rows(broker) == before


def test_list_orders_by_id_and_delete_is_idempotent(broker):
    for entry_id in ("b", "c", "a"):
        broker.upsert_cron_entry(CronSpec(id=entry_id, spec="@hourly", task_type="t"))

    assert [e.id for e in broker.list_cron_entries()] == ["a", "b", "c"]

    broker.delete_cron_entry("b")
    broker.delete_cron_entry("b")
    broker.delete_cron_entry("never-existed")
    assert [e.id for e in broker.list_cron_entries()] == ["a", "c"]
    with pytest.raises(NotFound):
        broker.get_cron_entry("b")


def test_due_list_excludes_paused_and_future_entries(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="hourly", spec="0 * * * *", task_type="t"))
    broker.upsert_cron_entry(CronSpec(id="minutely", spec="* * * * *", task_type="t"))
    broker.upsert_cron_entry(CronSpec(id="paused", spec="* * * * *", task_type="t", paused=True))
    broker.upsert_cron_entry(CronSpec(id="daily", spec="0 0 * * *", task_type="t"))
    clock.advance(3600)

    assert [e.id for e in broker.list_due_cron_entries()] == ["minutely", "hourly"]
    clock.advance(-1)
    assert [e.id for e in broker.list_due_cron_entries()] == ["minutely"]


def test_set_next_run_is_a_compare_and_set(broker, clock):
    entry = broker.upsert_cron_entry(CronSpec(id="e", spec="0 * * * *", task_type="t"))
    slot = entry.next_run_at
    following = slot + timedelta(hours=1)

    assert broker.update_cron_next_run("e", slot, following) is True
    assert broker.update_cron_next_run("e", slot, following + timedelta(hours=1)) is False

    assert broker.get_cron_entry("e").next_run_at == following


def test_fire_enqueues_the_entrys_task_and_moves_to_the_next_slot(broker, clock):
    broker.upsert_cron_entry(
        CronSpec(
            id="e",
            spec="0 * * * *",
            task_type="report:build",
            queue="reports",
            payload=b"{}",
            options={"priority": 8, "max_retry": 2, "metadata": {"team": "data"}},
        )
    )
    clock.advance(3600)
    (entry,) = broker.list_due_cron_entries()

    task = broker.fire_cron_entry(entry)

    assert (task.type, task.queue, bytes(task.payload), task.priority, task.max_retry) == (
        "report:build",
        "reports",
        b"{}",
        8,
        2,
    )
    assert task.state == State.PENDING
    assert task.metadata["team"] == "data" and task.metadata["conveyor.cron"] == "e"
    assert broker.get_cron_entry("e").next_run_at == START + timedelta(hours=2)
    assert broker.list_due_cron_entries() == []


def test_firing_the_same_snapshot_twice_enqueues_once(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="e", spec="0 * * * *", task_type="t"))
    clock.advance(3600)
    (entry,) = broker.list_due_cron_entries()
    (other_scheduler_copy,) = broker.list_due_cron_entries()

    first = broker.fire_cron_entry(entry)
    second = broker.fire_cron_entry(other_scheduler_copy)

    assert first is not None and second is None
    assert broker.tasks.count() == 1


def test_missed_slots_after_downtime_fire_once(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="e", spec="*/5 * * * *", task_type="t"))
    clock.advance(3600 + 60)  # twelve slots missed, now 01:01
    (entry,) = broker.list_due_cron_entries()

    broker.fire_cron_entry(entry)

    assert broker.tasks.count() == 1
    assert broker.get_cron_entry("e").next_run_at == START + timedelta(hours=1, minutes=5)
    assert broker.list_due_cron_entries() == []


def test_an_entry_paused_after_it_was_listed_does_not_fire(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="e", spec="0 * * * *", task_type="t"))
    clock.advance(3600)
    (entry,) = broker.list_due_cron_entries()
    broker.set_cron_paused("e", True)

    assert broker.fire_cron_entry(entry) is None
    assert broker.tasks.count() == 0


def test_resuming_a_paused_entry_skips_slots_missed_while_paused(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="e", spec="0 * * * *", task_type="t"))
    broker.set_cron_paused("e", True)
    clock.advance(5 * 3600 + 600)  # 05:10

    entry = broker.set_cron_paused("e", False)

    assert entry.paused is False
    assert broker.get_cron_entry("e").next_run_at == START + timedelta(hours=6)


def test_a_unique_entry_skips_a_slot_while_its_previous_run_is_incomplete(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="e", spec="* * * * *", task_type="sync", options={"unique_ttl": 3600}))
    clock.advance(60)
    first = broker.fire_cron_entry(broker.list_due_cron_entries()[0])
    clock.advance(60)

    skipped = broker.fire_cron_entry(broker.list_due_cron_entries()[0])

    assert first is not None and skipped is None
    assert broker.tasks.count() == 1
    assert broker.get_cron_entry("e").next_run_at == START + timedelta(minutes=3)
    leased = lease_one(broker)
    broker.ack(leased.id, leased.lease_id)
    clock.advance(60)
    assert broker.fire_cron_entry(broker.list_due_cron_entries()[0]) is not None


@pytest.mark.parametrize("entry_id", ["nightly\x00", "night\ud800ly"])
def test_an_id_no_database_can_store_names_no_entry(broker, clock, entry_id):
    # PostgreSQL refuses a NUL in a query: without the check, a DataError (a 500).
    broker.upsert_cron_entry(CronSpec(id="nightly", spec="0 3 * * *", task_type="report"))
    with pytest.raises(NotFound):
        broker.get_cron_entry(entry_id)
    with pytest.raises(NotFound):
        broker.set_cron_paused(entry_id, True)
    broker.delete_cron_entry(entry_id)
    assert [row["id"] for row in cron_rows(broker)] == ["nightly"]
