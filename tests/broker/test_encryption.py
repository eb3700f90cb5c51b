"""Encryption at rest, on both databases: what the table holds, what readers get.

Every test reads the table itself with SQL (the raw columns) next to what
the broker hands back: with a keyring the stored bytes never contain the
plaintext, and every reader gets the plaintext or, when its key is not
held, a clear error and nothing else.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from conveyor.broker import TaskSpec
from conveyor.broker.types import CronSpec
from conveyor.exceptions import DuplicateTask, KeyUnavailable
from conveyor.models import Task
from conveyor.sdk.encryption import key_id_of
from conveyor.sealing import TEXT_PREFIX
from conveyor.states import State
from conveyor.store import store_for
from tests.broker.factories import enqueue, lease_one

MARKER = b"4111-MARKER-1111"
PAYLOAD = b'{"card": "' + MARKER + b'"}'
RESULT = b'{"receipt": "' + MARKER + b'"}'
ERROR = "card " + MARKER.decode() + " declined"


def key(fill: int) -> str:
    return base64.b64encode(bytes([fill]) * 32).decode()


K1 = f"k1:{key(1)}"
K2 = f"k2:{key(2)}"


@pytest.fixture
def keyring() -> Iterator[None]:
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K1}):
        yield


def stored(db_alias: str, task_id: str) -> dict[str, Any]:
    """The row as the table holds it, read with SQL (no model, no opening)."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT payload, result, last_error, key_id FROM conveyor_task WHERE id = %s",
            [task_id],
        )
        payload, result, error, key_id = cursor.fetchone()
    return {
        "payload": bytes(payload) if payload is not None else None,
        "result": bytes(result) if result is not None else None,
        "last_error": error,
        "key_id": key_id,
    }


def table_bytes(db_alias: str) -> bytes:
    """Every payload, result and error text of the table, as stored."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute("SELECT payload, result, last_error FROM conveyor_task")
        rows = cursor.fetchall()
        cursor.execute("SELECT payload FROM conveyor_cronentry")
        rows += cursor.fetchall()
    out = b""
    for row in rows:
        for value in row:
            if value is not None:
                out += value.encode() if isinstance(value, str) else bytes(value)
    return out


# -- what is stored ---------------------------------------------------------------------


def test_every_enqueue_form_stores_the_payload_sealed_under_the_active_key(broker, db_alias, keyring):
    one = enqueue(broker, payload=PAYLOAD)
    batch = broker.enqueue_batch([TaskSpec(type="t", payload=PAYLOAD) for _ in range(3)])
    many = broker.enqueue_batch([TaskSpec(type="t", payload=PAYLOAD) for _ in range(12)])  # (a COPY on PostgreSQL)
    tx = broker.enqueue_tx([TaskSpec(type="t", payload=PAYLOAD, id="tx-1"), TaskSpec(type="t", payload=PAYLOAD)])
    grouped = enqueue(broker, payload=PAYLOAD, group="g")
    later = enqueue(broker, payload=PAYLOAD, process_in=60)

    tasks = [one, *(r.task for r in batch), *(r.task for r in many), *tx, grouped, later]
    assert all(t.payload == PAYLOAD for t in tasks)  # the answer is the plaintext
    for task in tasks:
        row = stored(db_alias, task.id)
        assert row["key_id"] == "k1"
        assert key_id_of(row["payload"]) == "k1" and MARKER not in row["payload"]
        assert broker.get_task(task.id).payload == PAYLOAD
    assert MARKER not in table_bytes(db_alias)


def test_results_and_error_texts_are_sealed_and_read_back_as_plaintext(broker, db_alias, keyring, clock):
    done = enqueue(broker, payload=PAYLOAD)
    failed = enqueue(broker, payload=PAYLOAD)
    dead = enqueue(broker, payload=PAYLOAD, max_retry=0)
    leased = {t.id: t for t in broker.lease("default", 3).tasks}
    assert {t.payload for t in leased.values()} == {PAYLOAD}

    assert broker.ack_many([(leased[done.id], RESULT)]) == []
    broker.settle_failure(failed.id, leased[failed.id].lease_id, ERROR)
    broker.settle_failure(dead.id, leased[dead.id].lease_id, ERROR)

    assert broker.get_task(done.id).result == RESULT
    assert broker.get_task(failed.id).last_error == ERROR
    assert broker.get_task(dead.id).last_error == f"retries exhausted: {ERROR}"
    assert stored(db_alias, failed.id)["last_error"].startswith(TEXT_PREFIX)
    assert MARKER not in table_bytes(db_alias)

    clock.advance(3600)  # the retry is due: leased again, its error opened on the way
    again = lease_one(broker)
    assert (again.id, again.payload, again.last_error) == (failed.id, PAYLOAD, ERROR)


def test_an_ack_by_id_and_lease_alone_seals_its_result_under_the_rows_key(broker, db_alias, keyring):
    task = enqueue(broker, payload=PAYLOAD)
    leased = lease_one(broker)

    broker.ack(task.id, leased.lease_id, RESULT)  # (REST, a webhook callback: no key id in hand)

    assert key_id_of(stored(db_alias, task.id)["result"]) == "k1"
    assert broker.get_task(task.id).result == RESULT


def test_a_leased_group_and_the_locked_path_get_plaintext(broker, db_alias, keyring):
    broker.set_rate_limit("limited", 100, 10)  # (the locked lease: model instances)
    enqueue(broker, payload=PAYLOAD, queue="limited")
    for _ in range(2):
        enqueue(broker, payload=PAYLOAD, group="g")

    assert [t.payload for t in broker.lease("limited", 5).tasks] == [PAYLOAD]
    assert [t.payload for t in broker.lease_group("default", "g").tasks] == [PAYLOAD, PAYLOAD]


def test_a_cron_entry_and_each_of_its_runs_are_sealed(broker, db_alias, keyring, clock):
    entry = broker.upsert_cron_entry(CronSpec(id="nightly", spec="* * * * *", task_type="report", payload=PAYLOAD))
    assert entry.payload == PAYLOAD
    clock.advance(120)

    [due] = broker.list_due_cron_entries()
    run = broker.fire_cron_entry(due)

    assert run is not None and run.payload == PAYLOAD
    assert broker.get_cron_entry("nightly").payload == PAYLOAD
    assert MARKER not in table_bytes(db_alias)


def test_uniqueness_by_content_is_derived_from_the_plaintext(broker, keyring):
    first = enqueue(broker, payload=PAYLOAD, unique=True)

    with pytest.raises(DuplicateTask):
        enqueue(broker, payload=PAYLOAD, unique=True)  # sealed anew (a fresh nonce), still the same content
    assert first.unique_key is not None and MARKER.decode() not in first.unique_key


def test_without_a_keyring_rows_are_plaintext_and_have_no_key_id(broker, db_alias):
    task = enqueue(broker, payload=PAYLOAD)
    assert stored(db_alias, task.id) == {"payload": PAYLOAD, "result": None, "last_error": "", "key_id": None}


def test_a_plaintext_row_stays_plaintext_until_it_is_resealed(broker, db_alias):
    old = enqueue(broker, payload=PAYLOAD)  # before the keyring
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K1}):
        leased = lease_one(broker)
        broker.ack_many([(leased, RESULT)])  # a row's values stay under one key (here none)
        assert stored(db_alias, old.id)["result"] == RESULT

        assert store_for(db_alias).reseal_tasks("k1", "", 100).resealed == 1
        row = stored(db_alias, old.id)
        assert row["key_id"] == "k1" and MARKER not in row["payload"] + row["result"]
        assert broker.get_task(old.id).result == RESULT


# -- a key this node does not hold -------------------------------------------------------


def test_a_row_under_a_key_not_held_reads_as_an_error_never_as_ciphertext(broker, db_alias, keyring, clock):
    task = enqueue(broker, payload=PAYLOAD)
    sealed = stored(db_alias, task.id)["payload"]

    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K2}):
        read = broker.get_task(task.id)
        assert read.payload == b"" and "'k1'" in read.seal_error and "CONVEYOR_ENCRYPTION_KEYS" in read.seal_error
        [leased] = broker.lease("default", 1).tasks
        assert leased.payload == b"" and leased.seal_error  # the gateway fails it, never pushes it
        with pytest.raises(KeyUnavailable, match="'k1'"):
            broker.ack(task.id, leased.lease_id, RESULT)  # a result it could not seal: nothing changes
    assert stored(db_alias, task.id)["payload"] == sealed
    assert broker.get_task(task.id).state == State.ACTIVE


def test_a_wrong_secret_under_the_same_key_id_does_not_open(broker, db_alias, keyring):
    task = enqueue(broker, payload=PAYLOAD)
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": f"k1:{key(9)}"}):
        read = broker.get_task(task.id)
    assert read.payload == b"" and "did not authenticate" in read.seal_error


def test_a_sealed_value_copied_into_another_row_does_not_open(broker, db_alias, keyring):
    a, b = enqueue(broker, payload=PAYLOAD), enqueue(broker, payload=b'{"other": 1}')
    with connections[db_alias].cursor() as cursor:
        cursor.execute("UPDATE conveyor_task SET payload = %s WHERE id = %s", [stored(db_alias, a.id)["payload"], b.id])

    assert broker.get_task(b.id).payload == b"" and broker.get_task(b.id).seal_error
    assert broker.get_task(a.id).payload == PAYLOAD


def test_a_cron_entry_whose_payload_cannot_be_opened_does_not_fire(broker, keyring, clock):
    broker.upsert_cron_entry(CronSpec(id="nightly", spec="* * * * *", task_type="report", payload=PAYLOAD))
    clock.advance(120)
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K2}):
        [due] = broker.list_due_cron_entries()
        with pytest.raises(KeyUnavailable):
            broker.fire_cron_entry(due)
    assert not Task.objects.using(broker.db).exists()


# -- re-sealing (manage.py conveyor keys rotate) ------------------------------------------


def test_resealing_moves_every_row_but_active_ones_to_the_new_key(broker, db_alias, keyring, clock):
    tasks = [enqueue(broker, payload=PAYLOAD) for _ in range(5)]
    running = lease_one(broker)
    broker.upsert_cron_entry(CronSpec(id="c", spec="@daily", task_type="t", payload=PAYLOAD))
    store = store_for(db_alias)

    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": f"{K2},{K1}"}):
        assert store.key_counts() == {"tasks": {"k1": 5}, "cron": {"k1": 1}, "attempts": {}}
        first = store.reseal_tasks("k2", "", 3)
        second = store.reseal_tasks("k2", first.last_id, 3)
        assert (first.resealed + second.resealed, first.skipped + second.skipped) == (4, 1)
        assert store.reseal_tasks("k2", second.last_id, 3).last_id == ""  # the pass is over
        assert store.reseal_cron("k2").resealed == 1
        assert store.key_counts() == {"tasks": {"k1": 1, "k2": 4}, "cron": {"k2": 1}, "attempts": {}}

        broker.ack_many([(running, RESULT)])  # its result under the key it was leased with
        assert store.reseal_tasks("k2", "", 10).resealed == 1
        assert store.key_counts()["tasks"] == {"k2": 5}
        for task in tasks:
            assert key_id_of(stored(db_alias, task.id)["payload"]) == "k2"
            assert broker.get_task(task.id).payload == PAYLOAD
        assert broker.get_task(running.id).result == RESULT
        assert broker.get_cron_entry("c").payload == PAYLOAD
    assert MARKER not in table_bytes(db_alias)


def test_resealing_leaves_rows_it_cannot_open_and_counts_them(broker, db_alias, keyring):
    enqueue(broker, payload=PAYLOAD)
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K2}):
        done = store_for(db_alias).reseal_tasks("k2", "", 10)
    assert (done.resealed, done.unopened) == (0, {"k1": 1})
    assert store_for(db_alias).key_counts()["tasks"] == {"k1": 1}


def test_a_retry_of_a_task_whose_payload_cannot_be_opened_keeps_the_servers_reason(broker, db_alias, keyring, clock):
    from conveyor.sealing import ServerText

    task = enqueue(broker, payload=PAYLOAD)
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K2}):
        [leased] = broker.lease("default", 1).tasks
        broker.settle_failure(task.id, leased.lease_id, ServerText(f"not run: {leased.seal_error}"))
    row = stored(db_alias, task.id)
    assert row["last_error"].startswith("not run: task ") and "'k1'" in row["last_error"]
    assert broker.get_task(task.id).state == State.RETRY
    clock.advance(timedelta(hours=1).total_seconds())
    assert lease_one(broker).payload == PAYLOAD  # the key is back (this broker holds k1 again)


def test_an_attempts_error_is_resealed_with_its_task_and_counted_per_key(broker, db_alias, keyring):
    task = enqueue(broker, payload=PAYLOAD, max_retry=3)
    leased = lease_one(broker)
    broker.settle_failure(leased.id, leased.lease_id, "Traceback ...\nValueError: card 4242", delay=0)
    store = store_for(db_alias)

    def attempt_row() -> tuple[str | None, str]:
        with connections[db_alias].cursor() as cursor:
            cursor.execute("SELECT key_id, error FROM conveyor_taskattempt WHERE task_id = %s", [task.id])
            return cursor.fetchone()

    key, error = attempt_row()
    assert key == "k1" and error.startswith(TEXT_PREFIX) and "4242" not in error
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": f"{K2},{K1}"}):
        assert store.key_counts()["attempts"] == {"k1": 1}
        assert store.reseal_tasks("k2", "", 10).resealed == 1
        assert store.key_counts()["attempts"] == {"k2": 1}
        key, error = attempt_row()
        assert key == "k2" and key_id_of(base64.b64decode(error[len(TEXT_PREFIX) :])) == "k2"
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K2}):  # k1 dropped: the history still opens
        (attempt,) = broker.task_attempts(task.id)
        assert (attempt.error, attempt.seal_error) == ("Traceback ...\nValueError: card 4242", "")
