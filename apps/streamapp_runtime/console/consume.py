"""``streamapp consume --kafka HOST:PORT TOPIC``: a topic's records from the beginning, one per line,
without joining a consumer group (nothing is committed). Exits after ``--max`` records, or when
``--timeout`` seconds pass without one (1 then if fewer than ``--max`` came)."""

from __future__ import annotations

import argparse
import sys
import time

from . import PropertyError, add_client_arguments, client_config

COMMAND = "streamapp consume"


def configure(parser: argparse.ArgumentParser) -> None:
    add_client_arguments(parser)
    parser.add_argument("--max", type=int, metavar="N", help="stop after N records")
    parser.add_argument("--timeout", type=float, default=30, metavar="SECONDS",
                        help="stop when this long passes without a record (default 30)")


def line(key: bytes | None, value: bytes | None, separator: str | None) -> str:
    text = "" if value is None else value.decode(errors="replace")
    if separator is None:
        return text
    return ("" if key is None else key.decode(errors="replace")) + separator + text


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    try:
        consumer = Consumer({**client_config(args.kafka, args.properties), "group.id": "streamapp-consume",
                             "enable.auto.commit": False, "enable.partition.eof": False})
    except (PropertyError, KafkaException) as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    try:
        deadline = time.monotonic() + args.timeout
        partitions = None
        while partitions is None:  # a topic created on first use may not exist yet
            topic = consumer.list_topics(args.topic, timeout=max(1.0, deadline - time.monotonic())).topics[args.topic]
            if topic.error is None and topic.partitions:
                partitions = sorted(topic.partitions)
            elif time.monotonic() >= deadline:
                print(f"{COMMAND}: topic {args.topic} not found within {args.timeout:g} s", file=sys.stderr)
                return 1
            else:
                time.sleep(0.5)
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions])
        seen = 0
        deadline = time.monotonic() + args.timeout
        while args.max is None or seen < args.max:
            msg = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
            if msg is None:
                if time.monotonic() >= deadline:
                    break
                continue
            if msg.error() is not None:
                print(f"{COMMAND}: {msg.error()}", file=sys.stderr)
                return 1
            print(line(msg.key(), msg.value(), args.key_separator), flush=True)
            seen += 1
            deadline = time.monotonic() + args.timeout
    finally:
        consumer.close()
    if args.max is not None and seen < args.max:
        print(f"{COMMAND}: {seen} of {args.max} records within {args.timeout:g} s of quiet", file=sys.stderr)
        return 1
    return 0
