"""Counts on dashboard pages read as English: "1 node", "2 nodes"."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conveyor.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


def tiles(client: Client) -> dict[str, str]:
    html = client.get(reverse("conveyor:dashboard:workers")).content.decode()
    found = re.findall(r'<span class="tile-n">([^<]*)</span><span class="tile-l">([^<]*)</span>', html)
    return {label: n for n, label in found}


def node(node_id: str) -> Node:
    now = timezone.now()
    return Node.objects.create(id=node_id, host="127.0.0.1", started_at=now, seen_at=now)


def test_the_workers_page_says_one_node_and_two_nodes(staff: Client) -> None:
    node("n1")
    assert tiles(staff)["node"] == "1"
    node("n2")
    assert tiles(staff)["nodes"] == "2"
    assert tiles(staff)["sessions"] == "0"
