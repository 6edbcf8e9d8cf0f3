"""The python step: the author's function, called with pandas DataFrames (Spark's mapInPandas, one
Arrow batch at a time, in the executors' Python workers).

A batch is given to the function whole. When it raises, or returns what cannot become the declared
columns, the batch is given again one record at a time: each record the function fails on goes to the
dead-letter topic (its columns as a JSON object, the Python error in the ``streamapp.error`` header),
the rest flow on. The worker produces the dead letters itself and waits for Kafka to take them before
its task ends, so a batch commits only after its dead letters are written; a task that Spark retries
writes them again (at least once, whatever ``deadLetter.delivery`` says: docs/api.md, "python").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

# At module level: mapInPandas hands the workers pandas frames; the type hints below name them.
import pandas as pd

from streamapp_api.coltypes import METADATA_TYPES
from streamapp_api.steps import PythonFunction

from streamapp_runtime import spark_compat
from streamapp_runtime.compile.frame import INTERNAL_PREFIX, Frame, StepError
from streamapp_runtime.compile.user_code import (DEAD_LETTER_FLUSH_S, DeadLetters, error_text, load_function, producer,
                                                 user_code_paths)


@dataclass(frozen=True)
class FunctionCall:
    """What each Python worker runs (pickled with its fields): the function over each batch."""

    module: str
    function: str
    paths: tuple[str, ...]
    names: tuple[str, ...]  # the output columns, in order
    arrow_schema: object  # pyarrow.Schema of the output: what each result must convert to
    letters: DeadLetters | None  # None: dead letters are off, a failed record is dropped

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        function = load_function(self.module, self.function, list(self.paths))
        failures: list[str] = []
        kafka, written = None, 0
        for batch in batches:
            out, failed = self._apply(function, batch)
            if failed and self.letters is not None:
                kafka = kafka or producer(self.letters)
                self._dead_letter(kafka, failed, failures)
                written += len(failed)
            yield out
        if kafka is not None:
            left = kafka.flush(DEAD_LETTER_FLUSH_S)
            if left or failures:  # the task fails and Spark runs it again: no dead letter is lost
                raise RuntimeError(f"{self.letters.where}: {left or len(failures)} dead letter(s) not written to "
                                   f"{self.letters.topic}: {'; '.join(failures[:3]) or 'Kafka did not take them'}")
            self.letters.written(written)

    def _apply(self, function: Callable, batch: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[pd.Series, str]]]:
        try:
            return self._result(function(batch.copy()), batch), []
        except (Exception, SystemExit):  # noqa: BLE001 - which record is it: one at a time below
            pass
        results, failed = [], []
        for k in range(len(batch)):
            record = batch.iloc[[k]].reset_index(drop=True)
            try:
                results.append(self._result(function(record.copy()), record))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - the author's code: its record is dead-lettered
                failed.append((record.iloc[0], error_text(exc)))
        if not results:
            return pd.DataFrame({name: pd.Series(dtype=object) for name in self.names}), failed
        return pd.concat(results, ignore_index=True), failed

    def _result(self, result, given: pd.DataFrame) -> pd.DataFrame:
        """The function's result with the declared columns in order (metadata it dropped taken from
        ``given`` when the rows are still the given ones, else null); raises what is wrong with it."""
        import pyarrow as pa

        if not isinstance(result, pd.DataFrame):
            raise TypeError(f"{self.module}.{self.function} returned a {type(result).__name__}, not a pandas DataFrame")
        result = result.reset_index(drop=True)
        missing = [n for n in self.names if n not in result.columns and not n.startswith("_")]
        if missing:
            raise TypeError(f"{self.module}.{self.function} returned no column(s) {', '.join(missing)} "
                            f"(it returned: {', '.join(map(str, result.columns)) or 'none'})")
        same_rows = len(result) == len(given)
        out = pd.DataFrame({name: result[name] if name in result.columns else
                            (given[name].reset_index(drop=True) if same_rows and name in given.columns
                             else pd.Series([None] * len(result), dtype=object))
                            for name in self.names})
        pa.Table.from_pandas(out, schema=self.arrow_schema, preserve_index=False)  # raises as Spark would
        return out

    def _dead_letter(self, producer, failed: list[tuple[pd.Series, str]], failures: list[str]) -> None:
        letters = self.letters

        def delivered(err, msg) -> None:
            if err is not None:
                failures.append(str(err))

        for row, error in failed:
            headers = [("streamapp.error", error), *letters.headers]
            headers += [(f"streamapp.{c[1:]}", str(row[c])) for c in ("_topic", "_partition", "_offset") if c in row]
            key = row.get("_key")
            # pandas writes its own types (numpy numbers, timestamps in ISO 8601) as JSON
            value = row[[c for c in row.index if not c.startswith("_")]].to_json(date_format="iso", default_handler=str)
            while True:
                try:
                    producer.produce(letters.topic, key=None if pd.isna(key) else str(key),
                                     value=value, headers=headers, on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    producer.poll(0.1)
            producer.poll(0)


def python_step(frame: Frame, value: PythonFunction, where: str, config_maps: list[str],
                letters: DeadLetters | None) -> Frame:
    """The step over ``frame``: the input's columns in (internal ones left out), the declared columns
    and the metadata columns the input had out. The function is imported here first, on the driver,
    so that a missing module fails the app at start with the step's path."""
    paths = user_code_paths(config_maps)
    try:
        load_function(value.module, value.function, paths)
    except Exception as exc:  # noqa: BLE001 - whatever importing the author's module raises
        raise StepError(f"{where}.python: cannot load {value.qualified_name}: {error_text(exc)}") from exc
    df = frame.df.select(*[c for c in frame.df.columns if not c.startswith(INTERNAL_PREFIX)])
    metadata = {c: METADATA_TYPES[c] for c in METADATA_TYPES if c in df.columns and c not in value.schema_}
    types = {**metadata, **value.schema_}
    ddl = ", ".join(f"`{name}` {type_text}" for name, type_text in types.items())
    call = FunctionCall(value.module, value.function, tuple(paths), tuple(types), spark_compat.arrow_schema(ddl),
                        letters)
    return frame.with_df(df.mapInPandas(call, ddl), event_time=None, watermark=None)
