"""The StreamApp operator: each StreamApp becomes a fenced Spark driver with a checkpoint volume.

Layers, imported in one direction only (import-linter checks it: tests/unit/test_import_contracts.py):
``names`` ← ``render`` and ``decide`` (pure) ← ``observe``, ``act``, ``report`` (Kubernetes, Kafka,
HTTP) ← ``reconcile`` ← ``handlers`` (kopf) and the CLIs.
"""
