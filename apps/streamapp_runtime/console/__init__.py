"""``streamapp produce`` and ``streamapp consume``: lines in and out of a Kafka topic from a shell or a
``kubectl run`` pod of the runtime image, with the same client the runtime uses (librdkafka), for any
Kafka the pods reach. ``-X KEY=VALUE`` passes a librdkafka property (credentials, TLS)."""

from __future__ import annotations

import argparse


class PropertyError(ValueError):
    pass


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka", required=True, metavar="HOST:PORT", help="bootstrap servers")
    parser.add_argument("topic", help="the topic")
    parser.add_argument("-X", dest="properties", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka client property, e.g. -X security.protocol=SASL_SSL (repeatable)")
    parser.add_argument("--key-separator", metavar="SEP", help="records are KEY<SEP>VALUE lines (e.g. a tab: "
                        "--key-separator $'\\t'); without it a line is the value and a record's key is not shown")


def client_config(bootstrap: str, properties: list[str]) -> dict[str, str]:
    config = {"bootstrap.servers": bootstrap}
    for item in properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PropertyError(f"-X {item!r}: expected KEY=VALUE")
        config[key.strip()] = value
    return config
