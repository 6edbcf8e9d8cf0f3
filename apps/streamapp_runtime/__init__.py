"""The pipeline runtime: a StreamApp compiled to Spark Structured Streaming queries.

Where things live, and where to add one:

- ``plan``: pure (no pyspark) — which queries an app becomes, their output mode, checkpoint and
  trigger. A new trigger kind or output mode is a row here.
- ``compile/``: the resolved pipeline (``streamapp_api.resolve``) to DataFrames — ``sources`` (a
  new value format: a row in ``sources.FORMATS``), ``steps/`` (one module per kind of step), ``dlq``.
- ``sinks/``: one writer per kind of query (a new sink: a module and a row in ``sinks.WRITERS``).
  Sink kinds and value formats are declared in the API (``streamapp_api.sinks.SINK_KINDS``,
  ``streamapp_api.sources.VALUE_FORMATS``); the runtime asks those, never a kind's name.
- ``run/``: the process — ``settings`` (pure), ``session``, ``runner`` (start and supervise),
  ``recovery`` (pure retry policy), ``kafka_wait``, ``listener``, ``metrics``, ``http_server``.
- ``checkpoint/``: what the runtime reads and writes in a checkpoint (its files, the fence,
  ``streamapp.json``, Spark's layout, a copy at a committed batch). Locations are strings formed by
  ``streamapp_api.checkpoint`` (paths or URIs, never pathlib); a new checkpoint backend starts there.
- ``state/``: the ``streamapp state`` tool (reads aggregate state from a checkpoint).
- ``connections``: how the runtime's own clients reach Kafka (librdkafka) and Postgres.
- ``spark_compat``: every use of Spark internals (py4j); re-check it on a Spark upgrade.

The runtime imports the API package and nothing else of this repository (no operator, no test bed);
its layers import downwards only: state, cli, run, sinks, compile, then plan and checkpoint, then
connections and spark_compat (.importlinter). ``streamapp run`` on a laptop and the driver
pod run the same ``run.runner``.
"""
