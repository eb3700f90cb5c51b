-- The PostgreSQL store's statements, by name (conveyor/store/postgres.py loads
-- them; comments go on lines of their own: a statement is sent as one line). Parameters are psycopg's named placeholders. A {fragment} in braces is
-- filled from the fragments at the end of this file, chosen by the caller
-- (the lease's order, and how its UPDATE finds the rows it picked).

-- name: insert_one
-- One task, committed by itself (autocommit): atomic, no BEGIN or COMMIT.
INSERT INTO conveyor_task ({columns}) VALUES ({values})

-- name: insert_one_taking_offer
-- One due task, taking the oldest live offer of its queue if there is one
-- (docs/architecture.md, "Offers"). The offer row is deleted, the task is
-- stored already leased under the offer's lease id and holder, and the
-- offer's node is notified with the task (delivered when this commits). The
-- queue's settings are checked as a lease would check them: a paused queue, a
-- rate or concurrency limit or the random order takes no offer. With no
-- offer to take the task is stored as given (pending), and woken for.
WITH o AS (
    DELETE FROM conveyor_offer WHERE id = (
        SELECT id FROM conveyor_offer
        WHERE queue = %(queue)s AND expires_at > %(now)s
          AND NOT EXISTS (
              SELECT 1 FROM conveyor_queue
              WHERE name = %(queue)s
                AND (paused OR COALESCE(rate, 0) <> 0 OR COALESCE(concurrency_limit, 0) <> 0 OR policy = 'random'))
        ORDER BY id LIMIT 1
        FOR UPDATE SKIP LOCKED)
    RETURNING channel, lease_id, holder)
INSERT INTO conveyor_task ({columns}) VALUES ({offer_values})
-- The notification carries the row's key id and payload as stored (sealed
-- when the row has a key id; base64, which has no spaces), not the body's.
RETURNING lease_id, lease_holder,
    CASE WHEN lease_id IS NOT NULL THEN pg_notify((SELECT channel FROM o),
        lease_id || ' ' || coalesce(key_id, '') || ' ' || %(body)s || ' ' || encode(payload, 'base64')) END

-- name: taken
-- The tasks a node's taken offers stored, by their lease ids (a notification
-- that did not arrive).
SELECT {leased_t} FROM conveyor_task AS t
WHERE t.lease_id = ANY(%(leases)s::varchar[]) AND t.lease_holder = %(holder)s AND t.state = 'active'

-- name: key_ids
-- The key ids of rows an acknowledgement names by id alone (its result is
-- sealed under the row's key).
SELECT id, key_id FROM conveyor_task WHERE id = ANY(%(ids)s::varchar[])

-- name: lease_of
-- What a task's row says of its lease (an INSERT retried after a lost
-- connection finds its first attempt's row: it may have taken an offer).
SELECT state, lease_id, lease_holder, lease_expires_at, started_at FROM conveyor_task WHERE id = %(id)s

-- name: lease
-- The one-statement lease of a queue without limits: read the queue's
-- settings, pick due rows in the queue's order with SKIP LOCKED (rows another
-- leaser holds are skipped, never waited for), claim them, and return them
-- with the next retry due time and the settings, in one round trip that
-- commits by itself. The UPDATE happens only when the settings allow it (not
-- paused, no rate or concurrency limit, the order the pick was written for):
-- otherwise the caller reads the settings from the returned row and takes the
-- locked path, or writes the statement for the other order. Each lease id is
-- the call's fresh ULID plus a digest of the task id: fresh per task and call.
WITH {no_flush_wait}
q AS (SELECT paused, rate, concurrency_limit, policy FROM conveyor_queue WHERE name = %(queue)s),
picked AS (
    SELECT id FROM conveyor_task
    WHERE queue = %(queue)s AND state IN ('pending', 'retry') AND due_at <= %(now)s
      AND NOT (expires_at <= %(now)s AND expires_at IS NOT NULL)
    ORDER BY priority DESC, due_at {order}, id {order}
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED),
leased AS (
    UPDATE conveyor_task AS t SET state = 'active', lease_id = %(lease)s || md5(t.id),
        lease_expires_at = %(expires)s, lease_holder = %(holder)s, started_at = %(now)s, updated_at = %(now)s,
        progress = 0, progress_message = ''
    {claim}
      AND NOT EXISTS (
          SELECT 1 FROM q WHERE q.paused OR COALESCE(q.rate, 0) <> 0 OR COALESCE(q.concurrency_limit, 0) <> 0)
      AND COALESCE((SELECT q.policy FROM q), 'fifo') = %(policy)s
    RETURNING {leased_t})
SELECT {leased_l}, m.next_due, q.paused, q.rate, q.concurrency_limit, q.policy
FROM (SELECT (SELECT min(due_at) FROM conveyor_task
              WHERE queue = %(queue)s AND state = 'retry' AND due_at > %(now)s) AS next_due) AS m
LEFT JOIN q ON true LEFT JOIN leased ON true {no_flush_wait_join}

-- name: mark_leased
-- Claimed rows (the locked path picked them) to active, each under its own lease id.
UPDATE conveyor_task AS t SET state = 'active', lease_id = v.lease_id, lease_expires_at = %(expires)s,
    lease_holder = %(holder)s, started_at = %(now)s, updated_at = %(now)s, progress = 0, progress_message = ''
FROM unnest(%(ids)s::varchar[], %(leases)s::varchar[]) AS v(id, lease_id)
WHERE t.id = v.id

-- name: complete_many
-- Complete the rows still active under their own lease (row by row: no
-- item's lease can vouch for another), storing each result; one array per
-- column, so every batch size shares one prepared statement. Each completed
-- row's attempt is recorded by the same statement (ATTEMPTS_KEPT: kept > 0),
-- numbered after its task's last, and the task's attempts older than its
-- last kept are deleted; the node is the worker's, else the lease holder.
-- The old attempts are looked up by the keys of the tasks past kept (an
-- array): a join of the attempts with the batch, planned once while the
-- table was empty, walked every stored attempt on each call.
WITH done AS (
    UPDATE conveyor_task AS t SET state = 'completed', finished_at = %(now)s, updated_at = %(now)s,
        purge_at = %(now)s::timestamptz + make_interval(secs => coalesce(t.retention, %(retention)s)),
        lease_expires_at = NULL, progress = 100, result = v.result
    FROM unnest(%(ids)s::varchar[], %(leases)s::varchar[], %(results)s::bytea[], %(sessions)s::varchar[],
                %(labels)s::text[], %(nodes)s::varchar[]) AS v(id, lease_id, result, session, labels, node)
    WHERE {complete_match} t.id = v.id AND t.lease_id = v.lease_id
    RETURNING {outcome_t}, t.started_at AS attempt_started, v.session, v.labels,
        coalesce(nullif(v.node, ''), t.lease_holder) AS attempt_node),
numbered AS (
    SELECT d.id, d.attempt_started, d.session, d.labels, d.attempt_node, d.key_id,
        coalesce((SELECT max(a.number) FROM conveyor_taskattempt AS a WHERE a.task_id = d.id), 0) + 1 AS number
    FROM done AS d WHERE %(kept)s::integer > 0),
trimmed AS (
    DELETE FROM conveyor_taskattempt AS a
    WHERE a.task_id = ANY(ARRAY(SELECT n.id FROM numbered AS n WHERE n.number > %(kept)s::integer))
      AND a.number <= (SELECT n.number FROM numbered AS n WHERE n.id = a.task_id) - %(kept)s::integer),
recorded AS (
    INSERT INTO conveyor_taskattempt
        (task_id, number, started_at, finished_at, worker_session, worker_labels, node, outcome, error, key_id)
    SELECT id, number, attempt_started, %(now)s, session, labels::jsonb, attempt_node, 'completed', '', key_id
    FROM numbered)
SELECT {outcome} FROM done

-- name: record_attempts
-- Attempts that ended at now (one per task), each numbered after its task's
-- last; a task's attempts older than its last kept are deleted. In the
-- caller's transaction, beside the outcome it records.
WITH v AS (
    SELECT * FROM unnest(%(ids)s::varchar[], %(started)s::timestamptz[], %(outcomes)s::varchar[],
                         %(errors)s::text[], %(sessions)s::varchar[], %(labels)s::text[], %(nodes)s::varchar[],
                         %(keys)s::varchar[])
        AS v(task_id, started_at, outcome, error, session, labels, node, key_id)),
numbered AS (
    SELECT v.*,
        coalesce((SELECT max(a.number) FROM conveyor_taskattempt AS a WHERE a.task_id = v.task_id), 0) + 1 AS number
    FROM v),
trimmed AS (
    DELETE FROM conveyor_taskattempt AS a
    WHERE a.task_id = ANY(ARRAY(SELECT n.task_id FROM numbered AS n WHERE n.number > %(kept)s::integer))
      AND a.number <= (SELECT n.number FROM numbered AS n WHERE n.task_id = a.task_id) - %(kept)s::integer)
INSERT INTO conveyor_taskattempt
    (task_id, number, started_at, finished_at, worker_session, worker_labels, node, outcome, error, key_id)
SELECT task_id, number, started_at, %(now)s, session, labels::jsonb, node, outcome, error, key_id FROM numbered

-- name: purge
-- Pick, unlink and delete purgeable rows in one statement: no ids travel to
-- Python and back (binding thousands of them stalls a busy node's loop).
WITH doomed AS MATERIALIZED (
    SELECT id FROM conveyor_task AS t
    WHERE ((t.state = 'completed' AND t.purge_at <= %(now)s)
           OR (t.state IN ('archived', 'canceled') AND t.finished_at <= %(cutoff)s))
      -- Kept while an unresolved edge (resolution '') still points at it.
      AND NOT EXISTS (SELECT 1 FROM conveyor_taskdependency AS e
                      WHERE e.depends_on_id = t.id AND e.resolution = '')
    LIMIT %(limit)s),
unlinked AS (DELETE FROM conveyor_taskdependency WHERE task_id IN (SELECT id FROM doomed))
DELETE FROM conveyor_task WHERE id IN (SELECT id FROM doomed)

-- name: hold_liveness
-- A node's liveness lock (docs/architecture.md, "Node death") on its own
-- connection: taken if this session does not hold it yet (CASE evaluates
-- the lock only then: session locks stack, and a check every half second
-- must not pile them up). True while this session holds it.
SELECT CASE WHEN EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 2
      AND classid = %(namespace)s::int::oid AND objid = %(key)s::int::oid
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
  THEN true ELSE pg_try_advisory_lock(%(namespace)s::int, %(key)s::int) END

-- name: dead_nodes
-- Nodes whose liveness lock nobody holds: PostgreSQL frees a session's
-- locks when the session ends, at once when the node's process dies. The
-- caller's own node is left out (its lock connection may be reconnecting),
-- and so is a node that recorded no key (it never holds one). Advisory locks
-- belong to a database: pg_locks lists every database's.
SELECT n.id FROM conveyor_node AS n
WHERE n.id <> %(alive)s AND n.liveness_key IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM pg_locks AS l
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
        AND l.classid = %(namespace)s::int::oid AND l.objid = n.liveness_key::oid
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
ORDER BY n.id

-- name: lock_group
-- Two leasers racing with SKIP LOCKED could each lock part of a group as they
-- scan; a transaction lock on the group makes one take the whole group.
SELECT pg_advisory_xact_lock(%(namespace)s, %(key)s)

-- fragment: order_fifo
ASC
-- fragment: order_lifo
DESC
-- fragment: claim_join
-- On connections with the server's settings: a join.
FROM picked WHERE t.id = picked.id AND t.state IN ('pending', 'retry')
-- fragment: claim_by_key
-- On a node's own connections (planning with sequential scans off, one generic
-- plan per statement): by primary key. There the join's generic plan can be a
-- merge join that walks the whole primary key index up to the newest picked id.
WHERE t.id = ANY(ARRAY(SELECT id FROM picked)) AND (t.state IN ('pending', 'retry')) IS TRUE
-- fragment: complete_match_plain
t.state = 'active' AND
-- fragment: complete_match_by_key
-- By primary key on a node's own connections ("IS TRUE": a state test no
-- index can serve), at most one lookup per result; planned on
-- "state = 'active'" with statistics that say the table is near empty, the
-- UPDATE would read the whole partial index of active tasks for each batch.
t.id = ANY(%(ids)s::varchar[]) AND (t.state = 'active') IS TRUE AND
-- fragment: no_flush_wait
-- The lease's own transaction commits without waiting for the WAL flush
-- (set_config(..., true) is local to it: nothing is left on the session,
-- which behind a transaction pooler may next serve someone else). First, so
-- that operators see it in pg_stat_activity. Losing a lease to a crash means
-- a second delivery, never a lost task (LEASE_ASYNC_COMMIT).
nf AS (SELECT set_config('synchronous_commit', 'off', true)),
-- fragment: no_flush_wait_join
CROSS JOIN nf
