"""Search inside tasks on PostgreSQL: GIN indexes over the plaintext JSON
payload and the metadata (docs/search.md, docs/decisions.md "Search").

Payloads are stored as bytes with a content type, so the payload index is
an expression index over ``conveyor_payload_json(payload)``: the bytes as
jsonb, NULL when they are not JSON. It is partial: rows sealed at rest (a
key id) or of another content type are not in it, nor can they match.
``jsonb_path_ops`` keeps the index small; it answers containment (``@>``),
which is what a ``where`` condition becomes. Built CONCURRENTLY (outside a
transaction) so that migrating a live table does not block enqueues. SQLite
has no such index: its search is a scan (conveyor/store/sqlite.py).
"""

from django.db import migrations

# PARALLEL RESTRICTED: an EXCEPTION block starts a subtransaction, which a
# parallel worker cannot; the leader evaluates these.
FUNCTIONS = """
CREATE OR REPLACE FUNCTION conveyor_payload_json(payload bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL RESTRICTED AS $$
BEGIN
    RETURN convert_from(payload, 'UTF8')::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;  -- not UTF-8, or not JSON: nothing to search
END $$;
CREATE OR REPLACE FUNCTION conveyor_payload_text(payload bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL RESTRICTED AS $$
BEGIN
    RETURN convert_from(payload, 'UTF8');
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;
"""
INDEXES = [
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS task_payload_search ON conveyor_task"
    " USING gin (conveyor_payload_json(payload) jsonb_path_ops)"
    " WHERE key_id IS NULL AND content_type = 'application/json'",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS task_metadata_search ON conveyor_task"
    " USING gin (metadata jsonb_path_ops) WHERE metadata <> '{}'::jsonb",
    # The planner takes no statistics from a partial index's expression, and
    # without them it guesses 1% of rows match any payload condition: then a
    # backwards scan of the primary key, filtering every row, looks cheaper
    # than the index for a first page, and takes seconds on 1M rows. With
    # statistics on the expression (PostgreSQL 14+) it sees a rare value is rare.
    "CREATE STATISTICS IF NOT EXISTS task_payload_json ON (conveyor_payload_json(payload)) FROM conveyor_task",
]
UNDO = [
    "DROP STATISTICS IF EXISTS task_payload_json",
    "DROP INDEX CONCURRENTLY IF EXISTS task_payload_search",
    "DROP INDEX CONCURRENTLY IF EXISTS task_metadata_search",
    "DROP FUNCTION IF EXISTS conveyor_payload_json(bytea)",
    "DROP FUNCTION IF EXISTS conveyor_payload_text(bytea)",
]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(FUNCTIONS)
        for statement in INDEXES:
            cursor.execute(statement)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for statement in UNDO:
            cursor.execute(statement)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("conveyor", "0007_key_id"),
    ]

    operations = [migrations.RunPython(create, drop, atomic=False)]
