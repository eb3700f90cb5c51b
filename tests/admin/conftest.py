"""What the admin and dashboard page tests share: a signed-in superuser and a task's page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse


@pytest.fixture
def staff() -> Client:
    User.objects.create_superuser("admin", "a@example.com", "pw")
    client = Client()
    client.login(username="admin", password="pw")
    return client


def task_page(client: Client, task_id: str) -> str:
    response = client.get(reverse("conveyor:dashboard:task", args=[task_id]))
    assert response.status_code == 200
    return response.content.decode()
