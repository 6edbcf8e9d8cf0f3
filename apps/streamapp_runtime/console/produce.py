"""``streamapp produce --kafka HOST:PORT TOPIC``: each line of stdin becomes one record of TOPIC."""

from __future__ import annotations

import argparse
import sys

from . import PropertyError, add_client_arguments, client_config

COMMAND = "streamapp produce"


def configure(parser: argparse.ArgumentParser) -> None:
    add_client_arguments(parser)


def records(lines, separator: str | None):
    """(key, value) per non-empty line; the key is None without a separator or when a line has none."""
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            continue
        if separator is not None and separator in line:
            key, _, value = line.partition(separator)
            yield key, value
        else:
            yield None, line


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    try:
        producer = Producer({**client_config(args.kafka, args.properties), "enable.idempotence": True})
    except (PropertyError, KafkaException) as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    failed: list[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    count = 0
    for key, value in records(sys.stdin, args.key_separator):
        producer.produce(args.topic, value=value.encode(), key=None if key is None else key.encode(),
                         on_delivery=delivered)
        producer.poll(0)
        count += 1
    left = producer.flush(60)
    if failed or left:
        reason = failed[0] if failed else f"{left} not acknowledged within 60 s"
        print(f"{COMMAND}: {count - len(failed) - left} of {count} records written to {args.topic}: {reason}",
              file=sys.stderr)
        return 1
    print(f"{count} records written to {args.topic}", file=sys.stderr)
    return 0
