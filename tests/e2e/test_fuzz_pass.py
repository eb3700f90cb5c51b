"""The fuzz pass's short form (bench/fuzz.py --short) against a real node.

One PostgreSQL + Redis node with an API token; every REST operation of its
schema, every Connect RPC, every worker frame, /ws/events, the
Authorization header, the routes outside the API and the dashboard's
pages and forms (signed in as a superuser) get hostile input
(each input one hostile value, taken in turn: a few hundred requests). No
answer may be a 5xx, every HTTP error is the JSON error shape, every
WebSocket answer an error frame and a close code, and the node logs no
traceback. (docs/operations.md, "What we test".)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from bench.fuzz import TOKEN, Fuzzer, Report, create_staff
from tests.e2e.conftest import module_node
from tests.e2e.support import ROOT, NodeProcess

pytestmark = pytest.mark.slow

SURFACES = {"rest", "connect", "ws-worker", "ws-events", "sse-events", "auth", "other", "dashboard"}


@pytest.fixture(scope="module")
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with module_node(request, "cluster", tmp_path_factory.mktemp("fuzz"), CONVEYOR_API_TOKENS=TOKEN) as proc:
        create_staff(sys.executable, ROOT, proc.env)  # the dashboard's superuser
        yield proc


@pytest.fixture(scope="module")
def report(node: NodeProcess) -> Report:
    report = Fuzzer(node.url, node.output, short=True).run()
    print(report.table())
    return report


def failures(report: Report) -> str:
    return "\n".join(report.failures[:40])


def test_the_short_pass_reaches_every_surface_with_hundreds_of_inputs(report):
    assert set(report.surfaces) == SURFACES, failures(report)
    assert report.total("tried") >= 300
    assert not [f for f in report.failures if "the fuzzer stopped" in f], failures(report)


def test_no_hostile_input_gets_a_5xx(report):
    assert report.total("five_xx") == 0, failures(report)


def test_every_http_error_is_the_json_error_shape(report):
    assert report.total("bad_shape") == 0, failures(report)


def test_every_websocket_answer_is_an_error_frame_and_a_close_code(report):
    assert report.total("ws_bad") == 0, failures(report)


def test_no_hostile_input_makes_the_node_log_a_traceback(report):
    assert report.total("tracebacks") == 0, failures(report)
