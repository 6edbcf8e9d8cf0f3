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
from streamapp_runtime.sinks.kafka_transactions import PartitionWriter, Target, Written, write_partition
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_replayed_batch_is_skipped_and_a_zombie_writer_is_fenced(kafka, names):
    out = names("out")
    create_topic(kafka.bootstrap, out, partitions=2)
    target = Target({"bootstrap.servers": kafka.bootstrap}, out, "q")
    rows = [("k1", "v1"), ("k2", "v2")]
    assert write_partition(target, "ck-1", 0, 0, rows) == [Written(0, 2)]
    # Batch 0 replayed (a crash after Kafka's commit, before Spark's): its marker is there, nothing written.
    assert write_partition(target, "ck-1", 0, 0, rows) == [Written(0, 2, skipped=True)]
    assert write_partition(target, "ck-1", 1, 0, []) == []  # an empty partition opens no transaction

    # Two drivers alive on one checkpoint, both writing batch 1's partition 0: the one that starts later
    # fences the older, whose rows reached the log but are never visible to read_committed readers.
    older = PartitionWriter(target, "ck-1", 1, 0)
    assert older.begin()
    older.produce([("z", "zombie")])
    older.producer.flush(10)
    newer = PartitionWriter(target, "ck-1", 1, 0)
    assert newer.begin()
    newer.produce([("n", "new")])
    newer.commit()
    with pytest.raises(KafkaException) as fenced:
        older.commit()
    assert re.search(r"FENCED|EPOCH", fenced.value.args[0].name()), fenced.value
    older.close()
    newer.close()
    assert write_partition(target, "ck-1", 1, 0, [("n", "new")]) == [Written(0, 1, skipped=True)]

    # A new checkpoint (a state reset, a checkpoint deleted by hand) starts new writers: its batch 0 is written.
    assert write_partition(target, "ck-2", 0, 0, rows) == [Written(0, 2)]

    committed = sorted((k, v) for k, v, _ in read_to_end(kafka.bootstrap, out))
    assert committed == sorted(rows + [("n", "new")] + rows)
    assert ("z", "zombie") in [(k, v) for k, v, _ in read_to_end(kafka.bootstrap, out, isolation="read_uncommitted")]
