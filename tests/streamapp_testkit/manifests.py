"""StreamApp manifests the runtime tests start from: an example with the topics and tables of a test."""

from __future__ import annotations

import yaml

from streamapp_testbed.paths import REPO_DIR


def click_sessions_manifest(topic: str, out: str, table: str, *, name: str | None = None,
                            max_offsets_per_trigger: int | None = None, delivery: str | None = None) -> dict:
    """examples/click-sessions.yaml reading `topic`, its windows written to the Kafka topic `out` and
    the Postgres table `table`; named after the table unless `name` is given.

    Without the example's trigger: each batch starts when the previous one ends, so a test's run is
    not paced by the clock. `max_offsets_per_trigger` keeps batches small (kills and restarts land in
    the middle of the data); `delivery` is the Kafka sink's.
    """
    doc = yaml.safe_load((REPO_DIR / "examples" / "click-sessions.yaml").read_text())
    doc["metadata"]["name"] = name or table.replace("_", "-")
    spec = doc["spec"]
    spec["sources"][0]["topic"] = topic
    if max_offsets_per_trigger is not None:
        spec["sources"][0]["maxOffsetsPerTrigger"] = max_offsets_per_trigger
    kafka_sink, postgres_sink = spec["sinks"][0]["kafka"], spec["sinks"][1]["postgres"]
    kafka_sink["topic"] = out
    if delivery is not None:
        kafka_sink["delivery"] = delivery
    postgres_sink["table"] = table
    spec.pop("trigger")
    return doc
