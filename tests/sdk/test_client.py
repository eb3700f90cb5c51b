"""The SDK's producer clients against a real node (conveyor.embedded: a
conveyord child process on a loopback port)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from conveyor import embedded
from conveyor.sdk import APIError, AsyncClient, Client, Duplicate, NotFound, task_request

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node() -> Iterator[embedded.EmbeddedNode]:
    with embedded.start() as started:
        yield started


@pytest.fixture
def client(node, monkeypatch) -> Iterator[Client]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with Client(node.url) as made:
        yield made


def test_enqueue_a_json_payload_and_read_it_back(client) -> None:
    task = client.enqueue(
        "email:send", {"to": "ada@example.com", "n": 1}, queue="mail", priority=2, metadata={"k": "v"}
    )
    assert (task.type, task.queue, task.state, task.priority) == ("email:send", "mail", "pending", 2)
    read = client.get_task(task.id)
    assert read.id == task.id
    assert read.json == {"to": "ada@example.com", "n": 1}
    assert read.metadata == {"k": "v"}
    assert read.content_type == "application/json"


def test_enqueue_bytes_with_a_content_type(client) -> None:
    task = client.enqueue("blob", b"\x00\xffraw", content_type="application/x-thing")
    read = client.get_task(task.id)
    assert read.payload == b"\x00\xffraw"
    assert read.content_type == "application/x-thing"
    assert read.json is None


def test_a_refused_enqueue_names_the_field_and_stores_nothing(client) -> None:
    with pytest.raises(APIError) as refused:
        client.enqueue("t", {}, id="refused-1", priority=42)
    assert (refused.value.status, refused.value.code, refused.value.field) == (400, "invalid_argument", "priority")
    with pytest.raises(NotFound):
        client.get_task("refused-1")


def test_a_second_live_task_with_the_unique_key_is_a_duplicate(client) -> None:
    client.enqueue("report", {}, unique_key="report:2026-11", process_in=3600)
    with pytest.raises(Duplicate) as duplicate:
        client.enqueue("report", {}, unique_key="report:2026-11", process_in=3600)
    assert duplicate.value.status == 409


def test_batch_items_succeed_or_fail_alone(client) -> None:
    items = client.enqueue_batch(
        [task_request("a", {"i": 1}), task_request("b", {}, priority=42), task_request("c", "x")]
    )
    assert [item.index for item in items] == [0, 1, 2]
    assert items[0].created and items[0].task is not None and items[0].task.type == "a"
    assert items[1].task is None and items[1].error is not None and items[1].error.field == "priority"
    assert items[2].created and client.get_task(items[2].task.id).json == "x"


def test_a_minimal_batch_answers_ids_and_states_only(client) -> None:
    known = client.enqueue("k", {}, id="minimal-known")
    items = client.enqueue_batch(
        [task_request("a", {"i": 1}), task_request("b", {}, priority=42), task_request("c", {}, id=known.id)],
        minimal=True,
    )
    assert [(i.index, i.task, i.created, i.state) for i in items] == [
        (0, None, True, "pending"), (1, None, False, None), (2, None, False, "pending")]  # fmt: skip
    assert client.get_task(items[0].id).json == {"i": 1}
    assert items[1].error is not None and items[1].error.field == "priority" and items[1].id is None
    assert items[2].id == known.id
    full = client.enqueue_batch([task_request("d", {})])
    assert full[0].task is not None and (full[0].id, full[0].state) == (full[0].task.id, "pending")


def test_async_client_passes_minimal_on(node) -> None:
    async def run() -> list:
        async with AsyncClient(node.url) as client:
            return await client.enqueue_batch([task_request("a", {})], minimal=True)

    (item,) = asyncio.run(run())
    assert item.task is None and item.created and item.id


def test_a_transaction_is_all_or_nothing(client) -> None:
    stored = client.enqueue_tx([task_request("a", {}, id="tx-1"), task_request("b", {}, id="tx-2")])
    assert [t.id for t in stored] == ["tx-1", "tx-2"]
    with pytest.raises(APIError) as refused:
        client.enqueue_tx([task_request("a", {}, id="tx-3"), task_request("b", {}, id="tx-4", max_retry=-1)])
    assert (refused.value.index, refused.value.field) == (1, "max_retry")
    with pytest.raises(NotFound):
        client.get_task("tx-3")


def test_an_unknown_or_odd_task_id_is_not_found(client) -> None:
    for task_id in ("no-such-task", "a b", "ä?#"):
        with pytest.raises(NotFound):
            client.get_task(task_id)


def test_request_calls_any_path_with_params(client) -> None:
    client.enqueue("t", {}, queue="listed")
    body = client.request("GET", "/api/v1/queues", params={"prefix": "listed"})
    assert "listed" in [q["name"] for q in body["queues"]]


def test_threads_share_one_client(client) -> None:
    ids: list[str] = []
    lock = threading.Lock()

    def produce() -> None:
        for i in range(20):
            task = client.enqueue("shared", {"i": i}, queue="threads")
            with lock:
                ids.append(task.id)

    threads = [threading.Thread(target=produce) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 120
    assert all(client.get_task(task_id).queue == "threads" for task_id in ids)


def test_the_async_client_does_the_same(node) -> None:
    async def run() -> None:
        async with AsyncClient(node.url) as client:
            task = await client.enqueue("async", {"a": 1})
            assert (await client.get_task(task.id)).json == {"a": 1}
            items = await client.enqueue_batch([task_request("a", {}), task_request("b", {}, priority=42)])
            assert items[0].created and items[1].error.field == "priority"
            with pytest.raises(NotFound):
                await client.get_task("a b")

    asyncio.run(run())
