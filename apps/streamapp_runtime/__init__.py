"""The pipeline runtime: a StreamApp compiled to Spark Structured Streaming queries.

Layers, imports pointing down only: ``settings`` and ``plan`` are pure (no pyspark); ``sources``,
``steps``, ``tables``, ``sinks`` and ``dlq`` build DataFrames; ``runner`` starts and supervises the
queries; ``cli`` and ``demo`` sit on top. ``streamapp run`` on a laptop and the driver pod run the
same ``runner.run``.
"""
