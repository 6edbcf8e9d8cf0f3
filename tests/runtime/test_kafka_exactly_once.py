"""Exactly-once delivery to Kafka (``delivery: exactly-once`` on Kafka sinks and the dead-letter topic)
on a real broker: a replayed batch writes nothing twice, a zombie writer's transaction is fenced and
its rows are never visible, and a new checkpoint's batch 0 is not mistaken for the old one's.

The same through kill -9s of real Spark drivers at random moments, on a volume and on the test bed's
S3 server: tests/runtime/test_restart.py.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaException

from streamapp_testkit.runtime import read_to_end
from streamapp_runtime.sinks.kafka_transactions import OpenWriters, PartitionWriter, Target, Written, write_partition
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_replayed_batch_is_skipped_and_a_zombie_writer_is_fenced(kafka, names):
    out = names("out")
    create_topic(kafka.bootstrap, out, partitions=2)
    target = Target({"bootstrap.servers": kafka.bootstrap}, out, "q")
    rows = [("k1", "v1"), ("k2", "v2")]
    worker = OpenWriters(4)  # the writers one Python worker keeps between batches
    assert write_partition(target, "ck-1", 0, 0, rows, worker) == [Written(0, 2)]
    # Batch 0 replayed (a crash after Kafka's commit, before Spark's): its marker is there, nothing
    # written, in a new Python worker (a restarted driver's) as in the one that wrote it.
    restarted = OpenWriters(4)
    assert write_partition(target, "ck-1", 0, 0, rows, restarted) == [Written(0, 2, skipped=True)]
    restarted.close()
    assert write_partition(target, "ck-1", 0, 0, rows, worker) == [Written(0, 2, skipped=True)]
    assert write_partition(target, "ck-1", 1, 0, [], worker) == []  # an empty partition opens no transaction

    # Two drivers alive on one checkpoint, both writing batch 1's partition 0: the one that starts later
    # fences the older, whose rows reached the log but are never visible to read_committed readers.
    older = PartitionWriter(target, "ck-1", 0)
    older.open()
    assert older.begin(1)
    older.produce([("z", "zombie")])
    older.producer.flush(10)
    newer = PartitionWriter(target, "ck-1", 0)
    newer.open()
    assert newer.begin(1)
    newer.produce([("n", "new")])
    newer.commit()
    with pytest.raises(KafkaException) as fenced:
        older.commit()
    assert re.search(r"FENCED|EPOCH", fenced.value.args[0].name()), fenced.value
    older.close()
    newer.close()
    # The writer this worker kept from batch 0 was fenced too: it gives way to a new one, which reads the marker.
    assert write_partition(target, "ck-1", 1, 0, [("n", "new")], worker) == [Written(0, 1, skipped=True)]

    # A new checkpoint (a state reset, a checkpoint deleted by hand) starts new writers: its batch 0 is written.
    assert write_partition(target, "ck-2", 0, 0, rows, worker) == [Written(0, 2)]

    worker.close()
    committed = sorted((k, v) for k, v, _ in read_to_end(kafka.bootstrap, out))
    assert committed == sorted(rows + [("n", "new")] + rows)
    assert ("z", "zombie") in [(k, v) for k, v, _ in read_to_end(kafka.bootstrap, out, isolation="read_uncommitted")]


def test_writers_kept_by_two_python_workers_take_a_partition_in_turns(kafka, names):
    """Spark gives a partition to whichever Python worker is free: each keeps its writer between
    batches, and one that was fenced by the other since its last batch opens a new one, which reads
    the marker. Every batch is written once, a replayed one in either worker not again."""
    out = names("out")
    create_topic(kafka.bootstrap, out, partitions=1)
    target = Target({"bootstrap.servers": kafka.bootstrap}, out, "q")
    workers = [OpenWriters(4), OpenWriters(4)]
    turns = [0, 0, 1, 0, 1, 1, 0]
    for batch, worker in enumerate(turns):
        assert write_partition(target, "ck", batch, 0, [(f"k{batch}", "v")], workers[worker]) == [Written(0, 1)]
        # the batch replayed (Spark's commit lost) in the worker that did not write it, then in the one that did
        for again in (1 - worker, worker):
            assert write_partition(target, "ck", batch, 0, [(f"k{batch}", "v")], workers[again]) == [
                Written(0, 1, skipped=True)]
    for worker in workers:
        worker.close()
    assert sorted(k for k, _, _ in read_to_end(kafka.bootstrap, out)) == sorted(f"k{b}" for b in range(len(turns)))


def test_a_topic_the_broker_creates_on_first_use_gets_its_rows_and_markers(kafka, names):
    """An app whose output topic nobody created (the broker's auto.create.topics.enable): the first
    writer's transaction must not touch the topic before its rows make the broker create it; kept
    writers then begin their next batches on a topic that exists."""
    out = names("auto")  # never created here
    target = Target({"bootstrap.servers": kafka.bootstrap}, out, "q")
    worker = OpenWriters(4)
    for batch in range(3):
        assert write_partition(target, "ck", batch, 0, [(f"k{batch}", "v")], worker) == [Written(0, 1)]
    restarted = OpenWriters(4)  # a new driver's worker, replaying the last batch
    assert write_partition(target, "ck", 2, 0, [("k2", "v")], restarted) == [Written(0, 1, skipped=True)]
    restarted.close()
    worker.close()
    assert sorted(k for k, _, _ in read_to_end(kafka.bootstrap, out)) == ["k0", "k1", "k2"]
