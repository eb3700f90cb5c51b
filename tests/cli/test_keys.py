"""``conveyor keys status|rotate|generate``."""

from __future__ import annotations

import base64

import pytest
from django.db import connection
from django.test import override_settings

from conveyor.broker import TaskSpec
from conveyor.broker.types import CronSpec
from conveyor.conf import parse_keyring
from tests.cli.support import fails, run, run_failing, table

pytestmark = pytest.mark.django_db(transaction=True)

K1 = "k1:" + base64.b64encode(bytes([1]) * 32).decode()
K2 = "k2:" + base64.b64encode(bytes([2]) * 32).decode()


def keys(*ring: str):  # type: ignore[no-untyped-def]
    return override_settings(CONVEYOR={"ENCRYPTION_KEYS": ",".join(ring)})


def stored_keys() -> list[str | None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT key_id FROM conveyor_task ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def test_status_counts_rows_per_key_and_says_which_key_may_be_dropped(broker):
    broker.enqueue(TaskSpec(type="t"))  # plaintext, from before the keyring
    with keys(K1):
        for _ in range(2):
            broker.enqueue(TaskSpec(type="t"))
        broker.upsert_cron_entry(CronSpec(id="c", spec="@daily", task_type="t"))
    with keys(K2, K1):
        result = run("keys", "status")
    assert table(result) == [
        ["KEY", "TASKS", "CRON", "ATTEMPTS", "KEYRING"],
        ["k2", "0", "0", "0", "active"],
        ["k1", "2", "1", "0", "yes"],
        ["(plaintext)", "1", "0", "0", "-"],
    ]
    assert "key k1 still holds 3 rows" in result.err


def test_rotate_reseals_every_row_in_batches_and_status_shows_the_old_key_empty(broker):
    with keys(K1):
        ids = [broker.enqueue(TaskSpec(type="t", payload=b"secret")).id for _ in range(7)]
    with keys(K2, K1):
        result = run("keys", "rotate", "--batch", "3", "--pause", "0")
        assert "resealed 7 task rows and 0 cron entries under k2; 0 rows left" in result.out
        assert stored_keys() == ["k2"] * 7
        assert all(broker.get_task(i).payload == b"secret" for i in ids)
        after = run("keys", "status")
    assert table(after)[1:] == [["k2", "7", "0", "0", "active"], ["k1", "0", "0", "0", "yes"]]
    assert "key k1 holds no rows: it may be dropped" in after.err


def test_rotate_json_reports_what_it_did():
    with keys(K1):
        data = run("--json", "keys", "rotate").json()
    assert data == {"active": "k1", "resealed": 0, "cron_resealed": 0, "left": 0, "unopened": {}, "interrupted": False}


def test_rotate_leaves_rows_it_cannot_open_and_exits_non_zero(broker):
    with keys(K1):
        broker.enqueue(TaskSpec(type="t", payload=b"secret"))
    with keys(K2):
        _, message = run_failing("keys", "rotate")
    assert "cannot open were left as they are (k1: 1)" in message
    assert stored_keys() == ["k1"]


def test_rotate_without_a_keyring_and_bad_flags_are_one_line_errors():
    assert "CONVEYOR_ENCRYPTION_KEYS is not set" in fails("keys", "rotate")
    with keys(K1):
        assert fails("keys", "rotate", "--batch", "0").startswith("--batch: must be an integer from 1 to 1000")
        assert fails("keys", "rotate", "--pause", "soon").startswith("--pause:")


def test_generate_prints_a_key_the_setting_accepts():
    line = run("keys", "generate", "k9").out.strip()
    [(key_id, secret)] = parse_keyring(line)
    assert key_id == "k9" and len(secret) == 32
    assert "key_id" in fails("keys", "generate", "bad id")


@pytest.mark.parametrize("argv", [("keys", "status"), ("stats",)])
def test_a_bad_keyring_is_one_line_naming_the_key_for_every_verb(argv):
    with keys("k1:" + base64.b64encode(b"short").decode()):
        message = fails(*argv)
    assert message.startswith("invalid CONVEYOR setting: ENCRYPTION_KEYS: key 'k1' is 5 bytes"), message
    assert "\n" not in message.strip()
