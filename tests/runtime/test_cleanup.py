"""`streamapp cleanup` on real Kafka, Postgres, the test bed's S3 server and local Spark: one run of an
app with dead letters, an exactly-once Kafka sink and a Postgres sink leaves consumer groups,
transactional ids, ledger rows, a dead-letter topic and its checkpoint; cleanup lists them, deletes
them with --yes (not while a driver holds the checkpoint), and leaves a second app's alone.

The second app (the same name in another namespace, the same query names, the same ledger table) gets
its leftovers from the runtime's own writers, without a second driver run.
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
import yaml
from confluent_kafka.admin import AdminClient

from streamapp_api import checkpoint as locations
from streamapp_api import contract, load
from streamapp_api.cli import main
from streamapp_runtime.checkpoint import files as checkpoint_files
from streamapp_runtime.checkpoint.fence import Fence
from streamapp_runtime.cleanup.leftovers import query_id
from streamapp_runtime.run.consumer_groups import admin_commit
from streamapp_runtime.sinks import kafka_transactions as kafka_eos
from streamapp_runtime.sinks import postgres as pg_sink
from streamapp_runtime.sinks.dead_letter_topic import writer_name
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testkit.runtime import produce, run_available_now

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KAFKA_QUERY, PG_QUERY = "to-kafka", "to-pg"


def manifest(name: str, namespace: str, topics: dict[str, str], location: str, store) -> dict:
    return {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"kafka": {"bootstrapServers": "kafka:9092"},
                     "sources": [{"name": "orders", "topic": topics["in"], "schema": {"id": "string", "n": "long"}}],
                     "deadLetter": {"topic": topics["dlq"], "delivery": "exactly-once"},
                     "sinks": [{"name": KAFKA_QUERY, "from": "orders",
                                "kafka": {"topic": topics["out"], "delivery": "exactly-once"}},
                               {"name": PG_QUERY, "from": "orders",
                                "postgres": {"secretRef": {"name": "pg"}, "table": "orders", "primaryKey": ["id"]}}],
                     "state": {"checkpoint": {"location": location, "s3": {
                         "endpoint": store.endpoint, "region": "us-east-1", "pathStyleAccess": True}}}}}


@pytest.fixture
def database(postgres):
    name = f"cleanup_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres.dsn.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def cleanup(path, kafka, dsn: str, capsys, *flags: str) -> tuple[int, list[dict], str]:
    code = main(["cleanup", str(path), "--kafka", kafka.bootstrap, "--postgres", f"pg={dsn}", "-o", "json", *flags])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def groups(admin) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(timeout=30).valid}


def ledger(dsn: str) -> set[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return set(conn.execute(f"SELECT DISTINCT query, checkpoint_id FROM {pg_sink.BATCHES}").fetchall())


def second_apps_leftovers(kafka, admin, dsn: str, name: str, topics: dict[str, str], root: str) -> set[str]:
    """What the same app in namespace dev would have left, written by the runtime's own writers; its groups."""
    other = str(uuid.uuid4())
    checkpoint_files.write_text(locations.join(locations.query_checkpoint(root, KAFKA_QUERY), "metadata"),
                                json.dumps({"id": other}) + "\n")
    offsets = {(topics["in"], 0): 1}
    made = {contract.consumer_group("dev", name, KAFKA_QUERY), writer_name("orders", other)}
    for group in made:
        admin_commit(admin)(group, offsets)
    eos = kafka_eos.Target({"bootstrap.servers": kafka.bootstrap}, topics["out"], KAFKA_QUERY)
    writers = kafka_eos.OpenWriters(1)
    kafka_eos.write_partition(eos, other, 0, 0, [("k", "v")], writers)
    writers.close()
    pg = pg_sink.Target(dsn, "orders", ("id", "n"), ("text", "bigint"), ("id",), PG_QUERY)
    pg_sink.write_partition(pg, other, 0, 0, [{"id": "dev-only", "n": 1}])
    return made | {kafka_eos.writer_id(KAFKA_QUERY, other, 0)}


def test_cleanup_lists_then_deletes_what_one_app_left_and_nothing_of_another(
        spark, kafka, database, object_store, names, tmp_path, capsys):
    topics = {part: names(part) for part in ("in", "out", "dlq")}
    for topic in topics.values():
        create_topic(kafka.bootstrap, topic, partitions=2)
    produce(kafka.bootstrap, topics["in"], [(f"k{i}", "{broken" if i % 4 == 0 else {"id": f"k{i}", "n": i})
                                            for i in range(20)])
    name = names("shop")[-30:].lstrip("-")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in object_store.spark_conf().items():  # as the driver reaches it (tests only: keys in conf)
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    bucket = object_store.create_bucket(name)
    doc = manifest(name, "prod", topics, f"{bucket}/prod", object_store)
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(doc))
    root = locations.checkpoint_root(f"{bucket}/prod", None)
    run_available_now(spark, load(doc), kafka, root, dsn=database)

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    ids = {q: query_id(checkpoint_files.read_text(locations.join(locations.query_checkpoint(root, q), "metadata")))
           for q in (KAFKA_QUERY, PG_QUERY)}
    markers = {g for g in groups(admin) if g.startswith(f"streamapp.{KAFKA_QUERY}.{ids[KAFKA_QUERY]}.")}
    own = {contract.consumer_group("prod", name, q) for q in (KAFKA_QUERY, PG_QUERY)} | markers | {
        writer_name("orders", ids[KAFKA_QUERY])}  # the Kafka sink's query, first in spec order, owns the dead letters
    kept = second_apps_leftovers(kafka, admin, database, name, topics, locations.checkpoint_root(f"{bucket}/dev", None))
    assert own <= groups(admin) and markers and kept <= groups(admin)

    code, listed, _ = cleanup(path, kafka, database, capsys)
    assert code == 0
    by_kind: dict[tuple[str, str], set[str]] = {}
    for item in listed:
        by_kind.setdefault((item["kind"], item["action"]), set()).add(item["name"])
    assert by_kind[("consumer group", "delete")] == own
    # the other app's writer and cursor share our query and source names: listed, kept
    assert by_kind[("consumer group", "keep")] == kept - {contract.consumer_group("dev", name, KAFKA_QUERY)}
    assert by_kind[("transactional id", "keep")] == markers | {writer_name("orders", ids[KAFKA_QUERY])}
    assert by_kind[("dead-letter topic", "delete")] == {topics["dlq"]}
    assert by_kind[("sink topic", "keep")] == {topics["out"]}
    assert by_kind[("checkpoint", "delete")] == {f"{bucket}/prod"}
    assert by_kind[("ledger rows", "delete")] == {f"{pg_sink.BATCHES} query={PG_QUERY} checkpoint_id={ids[PG_QUERY]}"}
    assert own <= groups(admin) and (PG_QUERY, ids[PG_QUERY]) in ledger(database), "a dry run deletes nothing"

    # A driver holding the checkpoint (its marker not released): refused, nothing deleted.
    fence = Fence(root, "driver-still-running")
    fence.take()
    code, _, err = cleanup(path, kafka, database, capsys, "--yes")
    assert code == 3 and "driver-still-running" in err and own <= groups(admin)
    fence.release()

    code, _, err = cleanup(path, kafka, database, capsys, "--yes")
    assert code == 0, err
    assert not own & groups(admin) and kept <= groups(admin)
    wait_for("the dead-letter topic deleted", lambda: topics["dlq"] not in admin.list_topics(timeout=10).topics
             or NotYet("still listed"))
    assert topics["out"] in admin.list_topics(timeout=10).topics
    assert (PG_QUERY, ids[PG_QUERY]) not in ledger(database) and len(ledger(database)) == 1  # the second app's
    assert object_store.objects(bucket, "prod") == [] and object_store.objects(bucket, "dev")
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] > 1  # the sink table is the user's

    code, listed, _ = cleanup(path, kafka, database, capsys)
    assert code == 0 and not [item for item in listed if item["action"] == "delete"]
