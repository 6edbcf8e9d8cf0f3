"""spec.udfs: the author's Python functions, registered in the session under their names so that the
app's expressions call them (Spark's Python UDFs, one record at a time).

A call that raises returns null, and its arguments go to the dead-letter topic with the Python error.
The worker produces that dead letter and waits for Kafka to take it at once (failures are rare), so it
is written before the batch commits; a task Spark runs again writes it again (at least once).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from streamapp_runtime.compile.frame import StepError
from streamapp_runtime.compile.user_code import (DEAD_LETTER_FLUSH_S, DeadLetters, dead_letters_of, error_text,
                                                 load_function, producer, user_code_paths)

# (module, function, paths) -> the function, in each Python worker: imported once, not per record.
_LOADED: dict[tuple[str, str, tuple[str, ...]], Callable] = {}


@dataclass(frozen=True)
class UdfCall:
    """What each Python worker runs for one call of a udf (pickled with its fields)."""

    name: str
    module: str
    function: str
    paths: tuple[str, ...]
    letters: DeadLetters | None  # None: dead letters are off, a failed call is null and nothing else

    def __call__(self, *arguments):
        key = (self.module, self.function, self.paths)
        if key not in _LOADED:
            _LOADED[key] = load_function(self.module, self.function, list(self.paths))
        try:
            return _LOADED[key](*arguments)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the author's code: its record is dead-lettered
            if self.letters is not None:
                self._dead_letter(arguments, error_text(exc))
            return None

    def _dead_letter(self, arguments: tuple, error: str) -> None:
        letters, failures = self.letters, []
        assert letters is not None
        kafka = producer(letters)
        kafka.produce(letters.topic, value=json.dumps({"udf": self.name, "arguments": list(arguments)}, default=str),
                      headers=[("streamapp.error", error), *letters.headers],
                      on_delivery=lambda err, msg: failures.append(str(err)) if err is not None else None)
        if kafka.flush(DEAD_LETTER_FLUSH_S) or failures:  # the task fails and Spark runs it again
            raise RuntimeError(f"{letters.where}: a dead letter was not written to {letters.topic}: "
                               f"{'; '.join(failures) or 'Kafka did not take it'}")
        letters.written(1)


def register_udfs(spark, app, kafka_options: dict[str, str], counters: dict) -> None:
    """Every udf of the app as a function of the session; each is imported here first, on the driver,
    so that a missing module fails the app at start naming the udf. ``counters`` gets the accumulator
    counting each udf's dead letters (user_code.dead_letters_of)."""
    config_maps = list(app.spec.user_code.config_maps) if app.spec.user_code is not None else []
    paths = user_code_paths(config_maps)
    for k, udf in enumerate(app.spec.udfs or []):
        where = f"spec.udfs[{k}]"
        try:
            load_function(udf.module, udf.function, paths)
        except Exception as exc:  # noqa: BLE001 - whatever importing the author's module raises
            raise StepError(f"{where}: cannot load {udf.module}.{udf.function}: {error_text(exc)}") from exc
        letters = dead_letters_of(spark, app, kafka_options, where, (("streamapp.udf", udf.name),), counters)
        spark.udf.register(udf.name, UdfCall(udf.name, udf.module, udf.function, tuple(paths), letters), udf.returns)
