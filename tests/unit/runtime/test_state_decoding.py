"""`streamapp state`'s pure parts: the keys a user asks for, and state rows decoded into the manifest's
columns (tests/runtime/test_state_query.py reads a real checkpoint)."""

from __future__ import annotations

import pytest

from streamapp_runtime.state import Measure, StateError, decode_row, format_table, parse_keys

pytestmark = pytest.mark.unit


def test_parse_keys():
    assert parse_keys(["session_id=s-17", "uuid=a=b"], ("session_id", "uuid"), "sessions") == {
        "session_id": "s-17", "uuid": "a=b"}
    for bad, says in ((["session_id"], "expected column=value"), (["user=x"], "not a groupBy column of stream 'sessions'"),
                      (["uuid=1", "uuid=2"], "given twice")):
        with pytest.raises(StateError, match=says):
            parse_keys(bad, ("session_id", "uuid"), "sessions")


def test_decode_rows():
    from datetime import datetime, timezone

    start, end = datetime(2026, 1, 1, 0, 2, tzinfo=timezone.utc), datetime(2026, 1, 1, 0, 3, tzinfo=timezone.utc)
    measures = [Measure("clicks", ("count",), True), Measure("avg", ("sum", "count"), False)]
    row = decode_row(["window", "session_id"], ((start, end), "s-1"), ["count", "sum", "count"], (3, 12.0, 4),
                     ("session_id",), measures)
    assert row == {"session_id": "s-1", "window_start": "2026-01-01T00:02:00Z", "window_end": "2026-01-01T00:03:00Z",
                   "clicks": 3, "avg.sum": 12.0, "avg.count": 4}
    # Session windows: the merged session is in the value, with the group columns again.
    row = decode_row(["user", "sessionStartTime"], ("a", start), ["session_window", "user", "count"],
                     ((start, end), "a", 2), ("user",), [Measure("n", ("count",), True)])
    assert row == {"user": "a", "window_start": "2026-01-01T00:02:00Z", "window_end": "2026-01-01T00:03:00Z", "n": 2}
    # Buffers that do not line up with the plan are shown under Spark's names, by position.
    assert decode_row(["k"], ("x",), ["sum", "sum"], (1, 2), ("k",), measures) == {"k": "x", "buffer0.sum": 1, "buffer1.sum": 2}
    # Same count, other order (the manifest's columns were reordered after the checkpoint was written).
    assert decode_row(["k"], ("x",), ["sum", "count", "count"], (1, 2, 3), ("k",), measures) == {
        "k": "x", "buffer0.sum": 1, "buffer1.count": 2, "buffer2.count": 3}
    assert format_table([{"a": 1, "b": None}], ["a", "b"]).splitlines() == ["a  b", "-  -", "1"]
