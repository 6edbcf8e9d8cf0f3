"""When an available-now query has nothing left to do (streamapp_runtime.run.stopping.ran_dry): its last
batch read no new offsets and left the watermark where the batch before it had it."""

from __future__ import annotations

import pytest

from streamapp_runtime.run.stopping import ran_dry

pytestmark = pytest.mark.unit


def batch(rows: int, start: str | None, end: str, watermark: str | None = None) -> dict:
    progress = {"numInputRows": rows, "sources": [{"startOffset": start, "endOffset": end}]}
    if watermark is not None:
        progress["eventTime"] = {"watermark": watermark}
    return progress


OFFSETS_0, OFFSETS_9 = '{"t":{"0":0}}', '{"t":{"0":9}}'


@pytest.mark.parametrize("progress, dry", [
    ([], False),
    ([batch(9, OFFSETS_0, OFFSETS_9)], False),  # records read
    ([batch(9, OFFSETS_0, OFFSETS_9), batch(0, OFFSETS_9, OFFSETS_9)], True),  # a ttl's empty batch, no watermark
    # the empty batch after the records closes windows with the watermark they moved: one more is needed
    ([batch(9, OFFSETS_0, OFFSETS_9, "T1"), batch(0, OFFSETS_9, OFFSETS_9, "T2")], False),
    ([batch(0, OFFSETS_9, OFFSETS_9, "T2"), batch(0, OFFSETS_9, OFFSETS_9, "T2")], True),
    ([batch(0, OFFSETS_0, OFFSETS_9)], False),  # offsets moved over no records (transaction markers): not the end
    ([batch(0, OFFSETS_0, OFFSETS_0)], True),
])
def test_an_available_now_query_runs_dry(progress, dry):
    assert ran_dry(progress) is dry
