"""The PostgreSQL store's named statements (conveyor/store/queries.sql) load and fill as written."""

from __future__ import annotations

import pytest

from conveyor.store import sql
from conveyor.store.postgres import complete_sql, insert_sql, lease_sql


def test_every_statement_and_fragment_loads_without_its_comments():
    statements, fragments = sql._sections()
    assert {
        "insert_one",
        "insert_one_taking_offer",
        "lease",
        "lease_of",
        "mark_leased",
        "complete_many",
        "purge",
    } <= set(statements)
    for text in [*statements.values(), *fragments.values()]:
        assert "--" not in text and "\n" not in text


@pytest.mark.parametrize("policy,order", [("fifo", "ASC"), ("lifo", "DESC")])
@pytest.mark.parametrize("by_key", [True, False])
@pytest.mark.parametrize("async_commit", [True, False])
def test_the_lease_is_written_for_its_order_claim_and_commit(policy, order, by_key, async_commit):
    text = lease_sql(policy, by_key=by_key, async_commit=async_commit)
    assert f"due_at {order}, id {order}" in text
    assert ("= ANY(ARRAY(SELECT id FROM picked))" in text) is by_key
    assert text.startswith("WITH nf AS (SELECT set_config('synchronous_commit', 'off', true))") is async_commit
    assert "{" not in text and "FOR UPDATE SKIP LOCKED" in text


def test_completion_and_insert_forms():
    assert "t.id = ANY(%(ids)s::varchar[])" in complete_sql(by_key=True)
    assert "t.id = ANY" not in complete_sql(by_key=False)
    assert "pg_notify" in insert_sql(take_offer=True) and "pg_notify" not in insert_sql(take_offer=False)


def test_a_comment_after_code_is_refused(tmp_path):
    # Statements are sent as one line: a trailing comment would hide the rest.
    bad = tmp_path / "queries.sql"
    bad.write_text("-- name: x\nSELECT 1 -- one\nFROM t\n")
    with pytest.raises(ValueError, match="comment after code"):
        sql.load(bad)
