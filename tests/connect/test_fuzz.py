"""Malformed bodies on every RPC: never a 5xx, always a Connect error (or an answer).

Seeded, bounded: for each method of TaskService, AdminService and
WebhookService, random bytes, truncated and bit-flipped encodings of a valid
message as binary protobuf, and broken or type-confused JSON.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from conveyor.v1 import service_pb2 as pb
from tests.connect.clients import SERVICES

pytestmark = pytest.mark.django_db(transaction=True)

JSON_VALUES = [None, True, 0, -1, 2**31, 2**63, 1.5, "", "x" * 300, "NaN", "-1s", "9999-99-99T00:00:00Z",
               "TASK_STATE_NOPE", [], [None], {}, {"a": [1, {"b": None}]}, "\u0000", "\ud800"]  # fmt: skip


def methods() -> list[tuple[str, str, type, str]]:
    """(service, method, request class, content type prefix): a stream's bodies are enveloped."""
    out = []
    for service in SERVICES:
        for method in pb.DESCRIPTOR.services_by_name[service].methods:
            kind = "application/connect+" if method.server_streaming else "application/"
            out.append((service, method.name, getattr(pb, method.input_type.name), kind))
    return out


def sample_message(cls: type) -> bytes:
    """A valid-looking message of *cls* with every scalar field set."""
    message = cls()
    for field in cls.DESCRIPTOR.fields:
        if field.is_repeated or field.message_type is not None:
            continue
        kind = field.cpp_type
        value = {field.CPPTYPE_STRING: "x" if field.type == field.TYPE_STRING else b"x", field.CPPTYPE_BOOL: True,
                 field.CPPTYPE_DOUBLE: 1.5, field.CPPTYPE_FLOAT: 1.5}.get(kind, 1)  # fmt: skip
        setattr(message, field.name, value)
    return message.SerializeToString()


def binary_bodies(rng: random.Random, cls: type) -> list[bytes]:
    good = sample_message(cls) or b"\x0a\x01x"
    flipped = bytearray(good)
    flipped[rng.randrange(len(flipped))] ^= 0xFF
    return [
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))),
        good[: max(1, len(good) // 2)],
        bytes(flipped),
        b"\x0a\xff\xff\xff\xff\x0f",  # a length far past the end
        b"\x08" + b"\xff" * 11,  # a varint too long
        b"\x0b\x0c",  # a group, which proto3 does not have
        good + b"\x7a\x03abc",  # an unknown field: allowed
    ]


def json_bodies(rng: random.Random, cls: type) -> list[bytes]:
    names = [f.json_name for f in cls.DESCRIPTOR.fields] or ["x"]
    confused = {name: rng.choice(JSON_VALUES) for name in names}
    return [
        b"{" + bytes(rng.randrange(32, 127) for _ in range(20)),
        b"[" * 5000,
        json.dumps(confused).encode(),
        json.dumps({rng.choice(names): rng.choice(JSON_VALUES)}).encode(),
        json.dumps(rng.choice(JSON_VALUES)).encode(),
        b'{"' + names[0].encode() + b'": "\xff\xfe"}',
        b"",
    ]


async def send_all(cases: list[tuple[str, bytes, str]]) -> Counter:
    import httpx

    from conveyor_site.asgi import application

    statuses: Counter = Counter()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://t") as client:
        for path, body, content_type in cases:
            response = await client.post(path, content=body, headers={"content-type": content_type})
            check(response, path, body, statuses)
    return statuses


def fuzz_cases(seed: int = 23) -> list[tuple[str, bytes, str]]:
    """(path, body, content type) for every method, three rounds of each kind of damage."""
    rng = random.Random(seed)
    cases = []
    for service, method, cls, kind in methods():
        path = f"/conveyor.v1.{service}/{method}"
        for _ in range(3):
            cases += [(path, body, f"{kind}proto") for body in binary_bodies(rng, cls)]
            cases += [(path, body, f"{kind}json") for body in json_bodies(rng, cls)]
    return cases


def check(response: Any, path: str, body: bytes, statuses: Counter) -> None:
    statuses[response.status_code] += 1
    assert response.status_code < 500, (path, body[:80], response.text[:300])
    if response.status_code >= 400 and response.status_code not in (404, 415):
        assert set(response.json()) == {"code", "message"}, response.text


def test_malformed_bodies_on_every_rpc_get_no_5xx():
    cases = fuzz_cases()
    statuses = async_to_sync(send_all)(cases)
    print(f"fuzz: {len(cases)} requests, statuses {dict(sorted(statuses.items()))}")
    assert sum(statuses.values()) == len(cases) and not any(code >= 500 for code in statuses)
