"""Sweepers, one ``run_once`` at a time, on both databases, with the fake clock.

Time moves only through ``clock.advance``; nothing sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from conveyor.broker import Broker, Dependency, TaskSpec
from conveyor.broker.types import CronSpec
from conveyor.conf import conveyor_settings
from conveyor.models import Task
from conveyor.notify.hooks import BrokerHooks
from conveyor.states import State
from conveyor.sweepers import SWEEPERS, BulkSweeper, GroupSweeper, Reaper, Rescuer, Scheduler

START = datetime(2026, 1, 1, tzinfo=UTC)  # the fake clock's start
DAY = 86400


def enqueue(broker: Broker, type: str = "sweep:test", **fields) -> Task:
    return broker.enqueue(TaskSpec(type=type, **fields))


def lease_one(broker: Broker, queue: str = "default") -> Task:
    tasks = broker.lease(queue, 1).tasks
    assert len(tasks) == 1, f"expected one leasable task in {queue!r}"
    return tasks[0]


def state(broker: Broker, task_id: str) -> str:
    return broker.get_task(task_id).state


def cron_tasks(broker: Broker, entry_id: str) -> list[Task]:
    return [t for t in broker.tasks.order_by("id") if (t.metadata or {}).get("conveyor.cron") == entry_id]


def test_the_five_sweepers_are_registered_by_name():
    expected = {
        "scheduler": Scheduler,
        "reaper": Reaper,
        "groups": GroupSweeper,
        "bulk": BulkSweeper,
        "rescuer": Rescuer,
    }
    assert expected == SWEEPERS


def test_the_bulk_sweeper_finishes_a_job_across_passes(broker):
    from conveyor.models import BulkJob

    ids = [t.task.id for t in broker.enqueue_batch([TaskSpec(type="t", queue="bulk-q") for _ in range(5)])]
    job = broker.start_bulk("cancel", {"queue": "bulk-q"})
    with override_settings(CONVEYOR={"BULK_BATCH_SIZE": 2, "BULK_BATCHES_PER_PASS": 2}):
        first = BulkSweeper(broker).run_once()
        second = BulkSweeper(broker).run_once()

    assert (first["bulk_done"], first["bulk_jobs_finished"]) == (4, 0)
    assert (second["bulk_done"], second["bulk_jobs_finished"]) == (1, 1)
    assert broker.bulk_job(job.id).state == BulkJob.DONE
    assert {broker.get_task(i).state for i in ids} == {"canceled"}


# -- scheduler ------------------------------------------------------------------------------


def test_scheduler_promotes_due_scheduled_tasks_and_not_future_ones(broker, clock):
    due = enqueue(broker, process_in=10)
    later = enqueue(broker, process_in=60)
    assert (due.state, later.state) == (State.SCHEDULED, State.SCHEDULED)
    clock.advance(10)

    report = Scheduler(broker).run_once()

    assert report == {"promoted": 1, "cron_fired": 0}
    assert state(broker, due.id) == State.PENDING
    assert state(broker, later.id) == State.SCHEDULED


def test_scheduler_with_nothing_due_reports_zeros_and_wakes_nobody(broker, clock, hooks):
    enqueue(broker, process_in=60)
    hooks.wakes.clear()

    assert Scheduler(broker).run_once() == {"promoted": 0, "cron_fired": 0}
    assert hooks.wakes == []


def test_scheduler_wakes_the_queues_it_promoted_into(broker, clock, hooks):
    enqueue(broker, queue="mail", process_in=5)
    enqueue(broker, queue="sms", process_in=5)
    enqueue(broker, queue="later", process_in=500)
    clock.advance(5)
    hooks.wakes.clear()

    Scheduler(broker).run_once()

    assert hooks.woken() == {"mail", "sms"}
    assert all(at is None for _, at in hooks.wakes)


def test_scheduler_fires_a_due_cron_entry_once_per_slot(broker, clock, hooks):
    broker.upsert_cron_entry(CronSpec(id="tick", spec="* * * * * *", task_type="tick", queue="ticks"))
    clock.advance(1)
    hooks.wakes.clear()

    first = Scheduler(broker).run_once()
    second = Scheduler(broker).run_once()  # same second: the slot is taken

    assert (first["cron_fired"], second["cron_fired"]) == (1, 0)
    [task] = cron_tasks(broker, "tick")
    assert (task.type, task.queue, task.state) == ("tick", "ticks", State.PENDING)
    assert task.metadata["conveyor.slot"] == "2026-01-01T00:00:01Z"
    assert "ticks" in hooks.woken()


def test_scheduler_fires_the_next_slot_when_its_time_comes(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="tick", spec="* * * * * *", task_type="tick"))
    clock.advance(1)
    Scheduler(broker).run_once()

    clock.advance(1)
    report = Scheduler(broker).run_once()

    assert report["cron_fired"] == 1
    assert [t.metadata["conveyor.slot"] for t in cron_tasks(broker, "tick")] == [
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:02Z",
    ]


def test_scheduler_does_not_fire_a_cron_entry_before_its_slot(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="q", spec="*/15 * * * *", task_type="report"))
    clock.advance(15 * 60 - 1)

    assert Scheduler(broker).run_once()["cron_fired"] == 0
    assert cron_tasks(broker, "q") == []


def test_missed_slots_after_a_long_gap_fire_once(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="q", spec="*/15 * * * *", task_type="report"))
    clock.advance(3 * 3600 + 60)  # 03:01: twelve slots since 00:15 were missed

    report = Scheduler(broker).run_once()
    again = Scheduler(broker).run_once()

    assert (report["cron_fired"], again["cron_fired"]) == (1, 0)
    assert len(cron_tasks(broker, "q")) == 1
    assert broker.get_cron_entry("q").next_run_at == START + timedelta(hours=3, minutes=15)


def test_scheduler_skips_a_paused_cron_entry(broker, clock):
    broker.upsert_cron_entry(CronSpec(id="p", spec="* * * * * *", task_type="tick", paused=True))
    clock.advance(5)

    assert Scheduler(broker).run_once()["cron_fired"] == 0


def test_one_broken_cron_entry_does_not_stop_the_others_or_the_promotions(broker, clock, monkeypatch):
    broker.upsert_cron_entry(CronSpec(id="a-broken", spec="* * * * * *", task_type="tick"))
    broker.upsert_cron_entry(CronSpec(id="b-fine", spec="* * * * * *", task_type="tick"))
    scheduled = enqueue(broker, process_in=1)
    clock.advance(1)
    real_fire = broker.fire_cron_entry

    def fire(entry):
        if entry.id == "a-broken":
            raise RuntimeError("boom")
        return real_fire(entry)

    monkeypatch.setattr(broker, "fire_cron_entry", fire)

    report = Scheduler(broker).run_once()

    assert report == {"promoted": 1, "cron_fired": 1}
    assert len(cron_tasks(broker, "b-fine")) == 1
    assert state(broker, scheduled.id) == State.PENDING


# -- reaper ---------------------------------------------------------------------------------


def test_reaper_reclaims_an_expired_lease_into_retry(broker, clock, hooks):
    enqueue(broker, queue="mail")
    leased = lease_one(broker, "mail")
    clock.advance(conveyor_settings.LEASE_TTL + 1)
    hooks.wakes.clear()

    report = Reaper(broker).run_once()

    stored = broker.get_task(leased.id)
    assert (stored.state, stored.retried, stored.last_error) == (State.RETRY, 1, "lease expired")
    assert report["reaped"] == 1
    assert "mail" in hooks.woken()


def test_reaper_leaves_a_live_lease_alone(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    clock.advance(conveyor_settings.LEASE_TTL - 1)

    report = Reaper(broker).run_once()

    assert report["reaped"] == 0
    assert state(broker, leased.id) == State.ACTIVE


def test_reaper_archives_an_expired_lease_with_no_retries_left(broker, clock):
    enqueue(broker, max_retry=0)
    leased = lease_one(broker)
    clock.advance(conveyor_settings.LEASE_TTL + 1)

    report = Reaper(broker).run_once()

    stored = broker.get_task(leased.id)
    assert (stored.state, stored.last_error) == (State.ARCHIVED, "retries exhausted: lease expired")
    assert report["reaped"] == 1


def test_reaper_archives_tasks_that_expired_before_dispatch(broker, clock):
    stale = enqueue(broker, expires_in=30)
    fresh = enqueue(broker, expires_in=300)
    clock.advance(31)

    report = Reaper(broker).run_once()

    stored = broker.get_task(stale.id)
    assert (stored.state, stored.last_error) == (State.ARCHIVED, "task expired before dispatch")
    assert state(broker, fresh.id) == State.PENDING
    assert report["expired"] == 1


def test_reaper_purges_completed_tasks_past_their_retention(broker, clock):
    gone = enqueue(broker)
    kept = enqueue(broker, retention=3600)
    for _ in range(2):
        t = lease_one(broker)
        broker.ack(t.id, t.lease_id)

    report = Reaper(broker).run_once()

    assert report["purged"] == 1
    assert not broker.tasks.filter(id=gone.id).exists()
    assert state(broker, kept.id) == State.COMPLETED


def test_reaper_purges_archived_tasks_after_the_archive_retention(broker, clock):
    task = enqueue(broker)
    broker.archive_task(task.id)
    clock.advance(conveyor_settings.ARCHIVE_RETENTION - 1)
    assert Reaper(broker).run_once()["purged"] == 0

    clock.advance(1)

    assert Reaper(broker).run_once()["purged"] == 1
    assert not broker.tasks.filter(id=task.id).exists()


def test_reaper_promotes_a_blocked_dependent_whose_dependency_finished_unnoticed(broker, clock, db_alias, hooks):
    # A broker whose hooks resolve nothing: the completion goes unnoticed.
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    quiet.enqueue(TaskSpec(type="up", id="up", queue="upstream"))
    quiet.enqueue(TaskSpec(type="down", id="down", queue="downstream", depends_on=[Dependency("up")]))
    t = lease_one(quiet, "upstream")
    quiet.ack(t.id, t.lease_id)
    assert state(broker, "down") == State.BLOCKED
    hooks.wakes.clear()

    report = Reaper(broker).run_once()

    assert report["dependents_promoted"] == 1
    assert state(broker, "down") == State.PENDING
    assert "downstream" in hooks.woken()


def test_reaper_wakes_every_queue_with_due_work_and_only_those(broker, clock, hooks):
    enqueue(broker, queue="a")
    enqueue(broker, queue="b")
    enqueue(broker, queue="future", process_in=600)
    enqueue(broker, queue="busy")
    lease_one(broker, "busy")
    hooks.wakes.clear()

    report = Reaper(broker).run_once()

    assert report["queues_woken"] == 2
    assert sorted(hooks.wakes) == [("a", None), ("b", None)]


def test_reaper_with_nothing_to_do_reports_zeros(broker, clock, hooks):
    hooks.wakes.clear()

    assert Reaper(broker).run_once() == {
        "reaped": 0,
        "expired": 0,
        "purged": 0,
        "dependents_promoted": 0,
        "queues_woken": 0,
    }
    assert hooks.wakes == []


# -- group sweeper ----------------------------------------------------------------------------


@pytest.fixture
def group_sweeper(broker, monkeypatch):
    sweeper = GroupSweeper(broker, node=None)
    sweeper.fired = []
    monkeypatch.setattr(
        sweeper, "fire", lambda queue, group, task_type: sweeper.fired.append((queue, group, task_type))
    )
    return sweeper


def fill(broker: Broker, n: int, group: str = "g", queue: str = "default", type: str = "report:batch") -> None:
    for _ in range(n):
        enqueue(broker, type=type, queue=queue, group=group)


def test_group_sweeper_fires_a_group_that_reached_its_max_size(broker, clock, group_sweeper):
    broker.set_group_config("default", "g", max_size=3, max_delay=600, grace=600)
    fill(broker, 3)

    report = group_sweeper.run_once()

    assert report == {"groups_fired": 1}
    assert group_sweeper.fired == [("default", "g", "report:batch")]


def test_group_sweeper_fires_a_group_past_its_max_delay(broker, clock, group_sweeper):
    broker.set_group_config("default", "g", max_size=100, max_delay=30, grace=600)
    for _ in range(6):
        fill(broker, 1)
        clock.advance(5)  # a member every 5 s keeps the grace period from firing it

    assert group_sweeper.run_once() == {"groups_fired": 1}
    assert group_sweeper.fired == [("default", "g", "report:batch")]


def test_group_sweeper_fires_a_group_quiet_for_its_grace_period(broker, clock, group_sweeper):
    broker.set_group_config("mail", "digest", max_size=100, max_delay=600, grace=10)
    fill(broker, 2, group="digest", queue="mail", type="mail:digest")
    clock.advance(10)

    assert group_sweeper.run_once() == {"groups_fired": 1}
    assert group_sweeper.fired == [("mail", "digest", "mail:digest")]


def test_group_sweeper_leaves_groups_below_every_threshold(broker, clock, group_sweeper):
    broker.set_group_config("default", "g", max_size=3, max_delay=30, grace=10)
    fill(broker, 2)
    clock.advance(9)

    assert group_sweeper.run_once() == {"groups_fired": 0}
    assert group_sweeper.fired == []


def test_group_sweeper_fires_only_the_groups_that_are_due(broker, clock, group_sweeper):
    broker.set_group_config("default", "", max_size=2, max_delay=600, grace=600)
    fill(broker, 2, group="full")
    fill(broker, 1, group="half")
    fill(broker, 2, group="other-queue", queue="elsewhere")

    assert group_sweeper.run_once() == {"groups_fired": 1}
    assert group_sweeper.fired == [("default", "full", "report:batch")]


def test_group_sweeper_ignores_members_that_left_the_group_state(broker, clock, group_sweeper):
    broker.set_group_config("default", "g", max_size=2, max_delay=600, grace=600)
    fill(broker, 2)
    members = broker.lease_group("default", "g").tasks
    assert len(members) == 2

    assert group_sweeper.run_once() == {"groups_fired": 0}
    assert group_sweeper.fired == []
