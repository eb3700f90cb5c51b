"""Worker sessions in the cluster view (/api/v1/workers) over their lifetime.

Each test runs twice: ``dev`` (SQLite + in-memory layer) and ``cluster``
(PostgreSQL + Redis, several database threads).
"""

from __future__ import annotations

from conveyor.sdk import protocol as p
from tests.integration.test_worker_protocol import Raw, run, worker

ROUNDS = 20  # the row's insert and delete raced on a node with several database threads


async def listed(w: Raw, session_id: str) -> bool:
    response = await w.http.get("/api/v1/workers")
    assert response.status_code == 200, response.text
    return any(s["id"] == session_id for s in response.json()["workers"])


def test_a_session_closed_with_4400_after_welcome_is_not_listed_once_closed(cluster):
    node = cluster.node()

    async def one_session() -> tuple[str, int | None, bool]:
        async with worker(node) as w:
            welcome = await w.hello({"ghosts": 1})
            await w.send({"type": "teleport"})  # an unknown frame: the server closes with 4400
            _frames, code = await w.ending()
            return welcome["session_id"], code, await listed(w, welcome["session_id"])

    async def scenario() -> list[tuple[str, int | None, bool]]:
        return [await one_session() for _ in range(ROUNDS)]

    outcomes = run(scenario())
    left = [s["id"] for s in node.api("GET", "/api/v1/workers")["workers"]]

    assert {code for _, code, _ in outcomes} == {p.CLOSE_PROTOCOL_ERROR}
    ghosts = [session for session, _, still in outcomes if still]
    assert (ghosts, left) == ([], []), (
        f"{len(ghosts)} of {ROUNDS} listed right after their 4400 close, {len(left)} at the end"
    )
