"""The dead-letter writer's pure decisions (run.dead_letter_cursor): what a batch's progress tells, which
owner query counts a source, and what is left to read back, across clean batches, bad ones and a
restart after a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from streamapp_api import load
from streamapp_runtime import plan
from streamapp_runtime.run.dead_letter_cursor import (EARLIEST, Coverage, bad_count, batch_begin, batch_offsets,
                                                      initial_offsets, last_committed_offsets)

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[3]
T = "clicks"


def progress(start, end, bad=None, rows=10, name="q", extra_sources=()):
    metrics = {} if bad is None else {"streamapp.bad.clicks#clicks": {"bad": bad}}
    return {"name": name, "id": "id-1", "numInputRows": rows, "observedMetrics": metrics,
            "sources": [{"startOffset": start, "endOffset": end}, *extra_sources]}


def test_a_batch_gives_its_offsets_over_every_read_of_the_source_and_its_bad_count():
    p = progress({T: {"0": 5, "1": 7}}, {T: {"0": 9, "1": 8}}, bad=2,
                 extra_sources=[{"startOffset": {T: {"0": 4, "1": 7}}, "endOffset": {T: {"0": 10, "1": 8}}},  # a self-join's second read
                                {"startOffset": {"other": {"0": 0}}, "endOffset": {"other": {"0": 3}}}])  # another source
    assert batch_offsets(p, {T}) == ({(T, 0): 4, (T, 1): 7}, {(T, 0): 10, (T, 1): 8})
    assert bad_count(p, "clicks") == 2
    p["observedMetrics"]["streamapp.bad.clicks#clicks_2"] = {"bad": 1}
    p["observedMetrics"]["streamapp.bad.clicks-2#clicks_2"] = {"bad": 5}  # another source's
    assert bad_count(p, "clicks") == 3
    assert batch_offsets(progress(None, {T: {"0": 3}}), {T}) == (None, {(T, 0): 3})  # a checkpoint's first batch
    assert batch_offsets(progress('{"clicks": {"0": 1}}', '{"clicks": {"0": 3}}'), {T}) == ({(T, 0): 1}, {(T, 0): 3})
    assert bad_count(progress(None, {}, bad=None, rows=0), "clicks") == 0  # nothing read
    assert bad_count(progress(None, {}, bad=None, rows=4), "clicks") is None  # read, not counted: unknown


def test_a_batch_begins_at_its_start_the_checkpoints_initial_offsets_or_a_new_partitions_earliest():
    end = {(T, 0): 9, (T, 1): 9}
    assert batch_begin({(T, 0): 5, (T, 1): 6}, end, {}) == {(T, 0): 5, (T, 1): 6}
    assert batch_begin({(T, 0): 5}, end, {}) == {(T, 0): 5, (T, 1): EARLIEST}  # a partition added to the topic
    assert batch_begin(None, end, {(T, 0): 2, (T, 1): 3}) == {(T, 0): 2, (T, 1): 3}
    assert batch_begin(None, end, {}) == {(T, 0): EARLIEST, (T, 1): EARLIEST}  # no initial offsets found: read from the start
    files = {"0": '\x00v1\n{"clicks":{"0":5,"1":5}}', "1": 'v1\n{"clicks":{"0":3}}', "2": "", "3": "v1\n{broken"}
    assert initial_offsets(files) == {(T, 0): 3, (T, 1): 5}


def test_an_earlier_dead_letter_querys_checkpoint_gives_the_offsets_of_its_last_committed_batch():
    offsets = {"3": 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"clicks":{"0":40,"1":42}}',
               "4": 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":2,"conf":{}}\n{"clicks":{"0":50,"1":52}}'}
    assert last_committed_offsets(["0", "3", ".3.crc"], offsets.get) == {(T, 0): 40, (T, 1): 42}  # batch 4 not committed
    assert last_committed_offsets([], offsets.get) == {}


def run(coverage: Coverage, batches) -> list:
    """Feed (begin, end, bad) batches; after each, what would be read back if it were due now."""
    seen = []
    for begin, end, bad in batches:
        coverage.batch(begin, end, bad)
        seen.append(coverage.to_read() if coverage.dirty else None)
    return seen


def o(*offsets):
    return {(T, p): offset for p, offset in enumerate(offsets)}


@pytest.mark.parametrize("case, cursor, batches, reads, final_cursor", [
    ("clean batches only move the cursor: nothing is read back", {},
     [(o(0, 0), o(5, 5), 0), (o(5, 5), o(9, 9), 0)], [None, None], o(9, 9)),
    ("a batch with bad records is read back, from the cursor to its end", {},
     [(o(0, 0), o(5, 5), 0), (o(5, 5), o(9, 8), 1)], [None, (o(5, 5), o(9, 8))], o(5, 5)),
    ("batches after a bad one join the range until it is written", {},
     [(o(0, 0), o(5, 5), 2), (o(5, 5), o(9, 9), 0)], [(o(0, 0), o(5, 5)), (o(0, 0), o(9, 9))], o(0, 0)),
    ("after a crash: the cursor behind the pipeline's batch is a gap, read back though the batch is clean", o(3, 5),
     [(o(5, 5), o(9, 9), 0)], [(o(3, 5), o(9, 9))], o(3, 5)),
    ("after a crash: a replayed batch whose dead letters were written reads nothing", o(9, 9),
     [(o(5, 5), o(9, 9), 1)], [({}, {})], o(9, 9)),
    ("an unknown count is read back", {}, [(o(0, 0), o(5, 5), None)], [(o(0, 0), o(5, 5))], o(0, 0)),
    ("a new partition's earliest: read from the start", {},
     [({(T, 0): 0, (T, 1): EARLIEST}, o(5, 2), 1)], [({(T, 0): 0, (T, 1): EARLIEST}, o(5, 2))], {(T, 0): 0, (T, 1): EARLIEST}),
])
def test_what_is_read_back(case, cursor, batches, reads, final_cursor):
    coverage = Coverage(cursor=dict(cursor))
    assert run(coverage, batches) == reads, case
    assert coverage.cursor == final_cursor, case


def test_once_written_the_cursor_moves_to_the_end_of_the_range_and_clean_batches_move_it_again():
    coverage = Coverage()
    run(coverage, [(o(0, 0), o(5, 5), 1), (o(5, 5), o(7, 7), 0)])
    coverage.written()
    assert (coverage.cursor, coverage.dirty, coverage.to_read()) == (o(7, 7), False, ({}, {}))
    run(coverage, [(o(7, 7), o(8, 9), 0)])
    assert coverage.cursor == o(8, 9)


def example(name: str):
    return load(yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text()))


def test_the_first_sink_reading_a_json_source_owns_its_dead_letters_except_in_real_time_mode():
    assert plan.dead_letter_owners(example("click-sessions")) == {"clicks": "sessions-session-summaries"}
    assert plan.dead_letter_owners(example("not-looking-at-facebook")) == {}  # string sources have no bad records
    assert plan.dead_letter_owners(example("click-feed")) == {}  # real-time: a dead-letter query of its own
    doc = yaml.safe_load((REPO / "examples" / "click-sessions.yaml").read_text())
    doc["spec"]["sources"].append({**doc["spec"]["sources"][0], "name": "unread", "topic": "elsewhere"})
    app = load(doc)
    assert plan.dead_letter_owners(app) == {"clicks": "sessions-session-summaries"}
    assert [(p.name, p.kind) for p in plan.query_plans(app, "/ck") if p.kind == "dlq"] == [("dlq-unread", "dlq")]
    doc["spec"]["deadLetter"] = {"enabled": False}
    assert plan.dead_letter_owners(load(doc)) == {}
