"""The chaos suite's short form: each scenario of bench/chaos.py with ``--quick``.

A private PostgreSQL (``initdb``) and Redis serve the whole module; each
scenario gets a fresh database, its own nodes and SDK worker processes,
and producers enqueuing with ids over HTTP while the faults happen. No
acknowledged task may be lost or completed twice, and a graceful shutdown
may leave no stored enqueue unanswered. (docs/operations.md, "Chaos testing".)
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from bench.chaos import BY_NAME, Rig, run_scenario

pytestmark = pytest.mark.slow
GRACEFUL = {"rolling-sigterm", "graceful-shutdown"}


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    missing = [p for p in ("initdb", "pg_ctl", "redis-server") if shutil.which(p) is None]
    if missing:
        pytest.skip(f"the chaos suite needs {', '.join(missing)}")
    rig = Rig()
    yield rig
    rig.close()


@pytest.mark.parametrize("name", [n for n in BY_NAME if n != "poison"])
def test_no_acknowledged_task_is_lost_or_completed_twice(rig: Rig, name: str) -> None:
    result = run_scenario(rig, BY_NAME[name], quick=True)
    print(result)
    assert result.acked > 0 and result.gave_up == 0
    assert result.lost == 0, result.lost_ids
    assert result.completed_twice == 0
    assert result.archived == 0
    if name in GRACEFUL:
        assert result.no_answer_stored == 0


def test_a_poison_task_dead_letters_no_innocent_task(rig: Rig) -> None:
    result = run_scenario(rig, BY_NAME["poison"], quick=True)
    print(result)
    assert result.acked > 0 and result.gave_up == 0
    assert result.lost == 0, result.lost_ids
    assert result.completed_twice == 0
    assert result.archived == 0
