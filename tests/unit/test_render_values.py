"""The API's rendering of timestamps and JSON payloads (conveyor/api/render.py)."""

import codecs
import json
import threading
from datetime import UTC, datetime, timedelta, timezone

from conveyor.api.render import decoded, ts


def test_ts_renders_each_datetime_it_is_given_not_the_last_one():
    a = datetime(2026, 12, 4, 1, 2, 3, 456789, tzinfo=UTC)
    b = a + timedelta(seconds=1)
    assert [ts(a), ts(a), ts(b), ts(a), ts(None), ts(b)] == [
        "2026-12-04T01:02:03.456789Z",
        "2026-12-04T01:02:03.456789Z",
        "2026-12-04T01:02:04.456789Z",
        "2026-12-04T01:02:03.456789Z",
        None,
        "2026-12-04T01:02:04.456789Z",
    ]


def test_ts_of_an_equal_but_distinct_datetime_is_its_own_text():
    a = datetime(2026, 12, 4, tzinfo=UTC)
    other_zone = a.astimezone(timezone(timedelta(hours=2)))  # equal instant, other text
    assert ts(a) == "2026-12-04T00:00:00Z"
    assert ts(other_zone) == "2026-12-04T02:00:00+02:00"


def test_ts_from_many_threads_gives_each_its_own_text():
    stamps = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i) for i in range(8)]
    wrong: list[str] = []

    def render(stamp: datetime) -> None:
        want = stamp.isoformat().replace("+00:00", "Z")
        for _ in range(20_000):
            if ts(stamp) != want:
                wrong.append(want)
                return

    threads = [threading.Thread(target=render, args=(s,)) for s in stamps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_decoded_reads_utf8_json():
    assert decoded(b'{"a": [1, "\xc3\xa9"]}', "application/json") == {"a": [1, "é"]}
    assert decoded(memoryview(b"[]"), "application/vnd.api+json") == []


def test_decoded_reads_what_json_loads_reads_a_bom_utf16_utf32():
    value = {"k": "é"}
    text = json.dumps(value)
    assert decoded(codecs.BOM_UTF8 + text.encode(), "application/json") == value
    assert decoded(text.encode("utf-16"), "application/json") == value
    assert decoded(text.encode("utf-32"), "application/json") == value


def test_decoded_is_none_for_what_is_not_json():
    assert decoded(b"{not json", "application/json") is None
    assert decoded(b"\xff\xfe\xfd", "application/json") is None
    assert decoded(b'{"a": 1}', "text/plain") is None
    assert decoded(None, "application/json") is None
