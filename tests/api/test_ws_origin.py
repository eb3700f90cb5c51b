"""Browser-facing WebSockets refuse another site's pages (conveyor.api.origin)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client, override_settings

from conveyor_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _handshake(path: str, headers: list[tuple[bytes, bytes]]) -> bool:
    async def go() -> bool:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    return async_to_sync(go)()


@pytest.fixture
def staff_cookie() -> bytes:
    User.objects.create_user("ops", password="pw", is_staff=True, is_superuser=True)
    client = Client()
    assert client.login(username="ops", password="pw")
    return f"sessionid={client.cookies['sessionid'].value}".encode()


HOST = (b"host", b"conveyor.test:8080")


@override_settings(ALLOWED_HOSTS=["*"], CONVEYOR={"ALLOW_UNAUTHENTICATED": True})
def test_a_staff_session_from_a_foreign_page_cannot_open_the_event_stream(staff_cookie):
    foreign = [HOST, (b"cookie", staff_cookie), (b"origin", b"http://evil.example")]
    own = [HOST, (b"cookie", staff_cookie), (b"origin", b"http://conveyor.test:8080")]

    assert _handshake("/ws/events", foreign) is False
    assert _handshake("/ws/events", own) is True


@override_settings(CONVEYOR={"ALLOW_UNAUTHENTICATED": True})
def test_a_foreign_page_cannot_open_a_worker_session_on_a_tokenless_node():
    assert _handshake("/ws/worker", [HOST, (b"origin", b"https://evil.example")]) is False
    assert _handshake("/ws/worker", [HOST, (b"origin", b"null")]) is False  # a sandboxed page


@override_settings(CONVEYOR={"ALLOW_UNAUTHENTICATED": True})
def test_a_handshake_without_an_origin_is_not_a_pages_and_passes():
    assert _handshake("/ws/worker", [HOST]) is True


@override_settings(CSRF_TRUSTED_ORIGINS=["https://ops.example.com"], CONVEYOR={"ALLOW_UNAUTHENTICATED": True})
def test_an_origin_listed_in_csrf_trusted_origins_passes(staff_cookie):
    trusted = [HOST, (b"cookie", staff_cookie), (b"origin", b"https://ops.example.com")]
    assert _handshake("/ws/events", trusted) is True
