"""AdminService.WatchEvents refuses a filter no event can carry, as a unary call would.

A NUL in a queue name was taken: the stream opened and stayed silent
forever (no queue can be named so). Lone surrogates and bad UTF-8 are the
codec's refusal. Each is one end-of-stream message: ``invalid_argument``
naming the field.
"""

from __future__ import annotations

import asyncio
import json
import struct

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/conveyor.v1.AdminService/WatchEvents"


def envelope(body: bytes) -> bytes:
    return struct.pack(">BI", 0, len(body)) + body


async def watch(body: bytes, codec: str) -> list[tuple[int, bytes]]:
    """The stream's messages (flags, data), or TimeoutError if it stays open."""
    from conveyor_site.asgi import application

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client, asyncio.timeout(5):
        response = await client.post(
            PATH, content=envelope(body), headers={"content-type": f"application/connect+{codec}"}
        )
    assert response.status_code == 200, response.text
    data, messages = response.content, []
    while data:
        flags, size = struct.unpack(">BI", data[:5])
        messages.append((flags, data[5 : 5 + size]))
        data = data[5 + size :]
    return messages


@pytest.mark.parametrize(
    ("body", "codec", "says"),
    [(b'{"queues": ["a\\u0000b"]}', "json", "queues[0]: must not contain NUL"),
     (b'{"queues": ["ok", "\\u0000"]}', "json", "queues[1]: must not contain NUL"),
     (b"\x0a\x03a\x00b", "proto", "queues[0]: must not contain NUL"),
     (b'{"queues": ["\\ud800"]}', "json", "queues[0]"),
     (b'{"queues": ["x\\udc00"]}', "json", "queues[0]"),
     (b"\x0a\x02\xed\xa0", "proto", "bad UTF-8")],
    ids=["nul-json", "nul-second-json", "nul-proto", "high-surrogate", "low-surrogate", "bad-utf8-proto"],
)  # fmt: skip
def test_a_watch_filter_with_nul_or_a_lone_surrogate_ends_the_stream_with_invalid_argument(body, codec, says):
    messages = asyncio.run(watch(body, codec))

    assert len(messages) == 1 and messages[0][0] == 2, messages  # one end-of-stream message
    error = json.loads(messages[0][1])["error"]
    assert error["code"] == "invalid_argument" and says in error["message"], error
