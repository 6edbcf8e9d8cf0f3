"""User code (python steps, udfs): where its modules are found, how a function is loaded, and where
the records it fails on go (the dead-letter topic, produced by the Python worker that failed)."""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamapp_api import contract

from streamapp_runtime.connections import admin_config, librdkafka_client

# How long a task waits for Kafka to take its dead letters before it fails (and Spark retries it).
DEAD_LETTER_FLUSH_S = 60


def user_code_paths(config_maps: list[str]) -> list[str]:
    """The directories of spec.userCode's ConfigMaps, where this process finds them."""
    root = os.environ.get(contract.ENV_USER_CODE_DIR, contract.USER_CODE_DIR)
    return [contract.user_code_path(name, root) for name in config_maps]


def load_function(module: str, function: str, paths: list[str]) -> Callable:
    """The function, imported with the user-code directories first on the path (ImportError,
    AttributeError or TypeError say what is missing)."""
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    found = getattr(importlib.import_module(module), function)
    if not callable(found):
        raise TypeError(f"{module}.{function} is a {type(found).__name__}, not a function")
    return found


def error_text(exc: BaseException) -> str:
    """The Python error as the dead-letter header carries it: its type and message."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


@dataclass(frozen=True)
class DeadLetters:
    """Where user code's failed records go: the app's dead-letter topic, through a librdkafka producer
    of the worker's own (its configuration from the readers' options)."""

    topic: str
    config: dict[str, str]
    where: str  # the step's or udf's path in the spec
    headers: tuple[tuple[str, str], ...]  # besides streamapp.error: which step or udf failed
    # A Spark accumulator of the records written, added to by the workers once Kafka has taken them; the
    # driver reads it into the dead-letter metric (run.metrics, ``dead_lettered_by_user_code``).
    counted: Any = None

    def written(self, records: int) -> None:
        if self.counted is not None and records:
            self.counted.add(records)


# One producer per configuration in each Python worker: Spark reuses its workers between batches.
_PRODUCERS: dict[str, object] = {}


def producer(letters: DeadLetters):
    from confluent_kafka import Producer

    key = json.dumps(letters.config, sort_keys=True)
    if key not in _PRODUCERS:
        _PRODUCERS[key] = librdkafka_client(Producer, {**letters.config, "enable.idempotence": "true",
                                                       "linger.ms": "20"})
    return _PRODUCERS[key]


def dead_letters_of(spark, app, kafka_options: dict[str, str], where: str, headers: tuple[tuple[str, str], ...],
                    counters: dict[str, Any]) -> DeadLetters | None:
    """The app's dead-letter topic for user code's failed records; None when dead letters are off.
    ``counters`` (where -> accumulator) gets the accumulator that counts them."""
    topic = app.dead_letter_topic
    if topic is None:
        return None
    if where not in counters:  # a step compiled for each query that reads its stream counts into one
        counters[where] = spark.sparkContext.accumulator(0)
    return DeadLetters(topic, admin_config(kafka_options), where, headers, counters[where])
