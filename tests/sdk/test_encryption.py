"""End-to-end encryption on a real embedded node: the server stores and relays ciphertext only.

The node has no keyring of its own here: what its table holds is exactly
what the client sealed, read with SQL. The worker's handler gets the
plaintext; a worker without the key, or with another secret under that
key id, fails the task without calling the handler.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conveyor import embedded
from conveyor.sdk import AESGCM, Client, Duplicate, Task, TaskInfo, task_request
from conveyor.sdk.encryption import MARKER_KEY, key_id_of

pytestmark = pytest.mark.slow

MARKER = "4111-E2E-MARKER"
KEY = bytes([1]) * 32
# Sealed by upstream Conveyor's Go SDK under key id "k1" = 32 x 0x01 (tests/unit/test_encryption_envelope.py).
UPSTREAM_GO = bytes.fromhex("01026b31fa2631bc8ec32f8344f3319d4fed95d45187a2599c8ec57922b1de221cdf147ddcfed37d1cae62")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e-encryption") / "conveyor.sqlite3"


@pytest.fixture(scope="module")
def node(db: Path) -> Iterator[embedded.EmbeddedNode]:
    with embedded.start(f"sqlite:///{db}", env={"CONVEYOR_DISPATCH_SELF_CHECK": "0.5"}) as running:
        yield running


def stored(db: Path, task_id: str) -> tuple[bytes, dict[str, str], str]:
    """(payload, metadata, last error) as the table holds them."""
    with sqlite3.connect(db) as conn:
        payload, metadata, error = conn.execute(
            "SELECT payload, metadata, last_error FROM conveyor_task WHERE id = ?", [task_id]
        ).fetchone()
    return bytes(payload), json.loads(metadata), error


def until(client: Client, task_id: str, done: Callable[[TaskInfo], bool], timeout: float = 20.0) -> TaskInfo:
    deadline = time.monotonic() + timeout
    while True:
        info = client.get_task(task_id)
        if done(info) or time.monotonic() > deadline:
            return info
        time.sleep(0.05)


class Serving:
    """A worker on *queue* whose handler records every task it is given."""

    def __init__(self, node: embedded.EmbeddedNode, queue: str, **options: Any) -> None:
        self.seen: list[Task] = []
        self.worker = node.worker(concurrency=2, queues={queue: 1}, **options)
        self.worker.task("pay")(self.seen.append)
        threading.Thread(target=self.worker.run, daemon=True).start()

    def __enter__(self) -> Serving:
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()


def test_the_server_stores_ciphertext_and_the_handler_gets_plaintext(node, db) -> None:
    ring = AESGCM({"k1": KEY})
    client = Client(node.url, encryptor=ring)
    with Serving(node, "e2e-ok", encryptor=ring) as serving:
        task = client.enqueue("pay", {"card": MARKER}, queue="e2e-ok", metadata={"trace": "t1"}, retention=3600)
        assert until(client, task.id, lambda t: t.state == "completed").state == "completed"

    payload, metadata, _ = stored(db, task.id)
    assert key_id_of(payload) == "k1" and MARKER.encode() not in payload
    assert ring.decrypt(payload) == json.dumps({"card": MARKER}, separators=(",", ":")).encode()
    assert metadata == {"trace": "t1", MARKER_KEY: "1"}
    [seen] = serving.seen
    assert seen.payload == {"card": MARKER} and seen.metadata == {"trace": "t1"}  # the marker is taken out
    info = client.get_task(task.id)
    assert info.payload == payload and info.raw["encryption"] == {"at_rest": None, "end_to_end": "k1", "error": None}


def test_batch_and_tx_are_sealed_and_uniqueness_is_by_the_plaintext(node, db) -> None:
    client = Client(node.url, encryptor=AESGCM({"k1": KEY}))
    batch = client.enqueue_batch([task_request("pay", {"n": i, "m": MARKER}, queue="e2e-idle") for i in range(2)])
    [tx] = client.enqueue_tx([task_request("pay", {"m": MARKER}, queue="e2e-idle")])
    for task_id in [item.task.id for item in batch if item.task] + [tx.id]:
        assert MARKER.encode() not in stored(db, task_id)[0]

    client.enqueue("pay", {"m": MARKER}, queue="e2e-idle", unique=True)
    with pytest.raises(Duplicate):
        client.enqueue("pay", {"m": MARKER}, queue="e2e-idle", unique=True)  # sealed with a fresh nonce, same content


def test_a_worker_without_the_key_fails_the_task_without_calling_the_handler(node) -> None:
    client = Client(node.url, encryptor=AESGCM({"k1": KEY}))
    with Serving(node, "e2e-nokey") as serving:
        task = client.enqueue("pay", {"card": MARKER}, queue="e2e-nokey", max_retry=0)
        final = until(client, task.id, lambda t: t.state == "archived")
    assert serving.seen == []
    assert final.last_error == (
        "retries exhausted: not run: its payload is sealed end to end (key id 'k1') and this worker has no encryptor"
    )


def test_a_worker_with_another_secret_under_the_key_id_fails_it_too(node) -> None:
    client = Client(node.url, encryptor=AESGCM({"k1": KEY}))
    with Serving(node, "e2e-wrong", encryptor=AESGCM({"k1": bytes([2]) * 32})) as serving:
        task = client.enqueue("pay", {"card": MARKER}, queue="e2e-wrong", max_retry=0)
        final = until(client, task.id, lambda t: t.state == "archived")
    assert serving.seen == []
    assert "did not authenticate" in final.last_error and MARKER not in final.last_error


def test_plaintext_and_sealed_tasks_share_a_queue(node) -> None:
    ring = AESGCM({"k1": KEY})
    with Serving(node, "e2e-mixed", encryptor=ring) as serving:
        sealed = Client(node.url, encryptor=ring).enqueue("pay", {"kind": "sealed"}, queue="e2e-mixed")
        plain = Client(node.url).enqueue("pay", {"kind": "plain"}, queue="e2e-mixed")
        for task_id in (sealed.id, plain.id):
            until(node.client(), task_id, lambda t: t.state == "completed")
    assert sorted(t.payload["kind"] for t in serving.seen) == ["plain", "sealed"]


def test_a_payload_sealed_by_upstreams_go_sdk_opens_in_our_worker(node) -> None:
    # As their client sends it: the envelope as the payload, the marker in the metadata.
    body = {
        "type": "pay",
        "queue": "e2e-upstream",
        "payload": base64.b64encode(UPSTREAM_GO).decode(),
        "content_type": "text/plain",
        "metadata": {MARKER_KEY: "1"},
    }
    with Serving(node, "e2e-upstream", encryptor=AESGCM({"k1": KEY})) as serving:
        task = httpx.post(f"{node.url}/api/v1/tasks", json=body).json()
        until(node.client(), task["id"], lambda t: t.state == "completed")
    [seen] = serving.seen
    assert seen.raw_payload == b"launch-code" and seen.payload == b"launch-code"
