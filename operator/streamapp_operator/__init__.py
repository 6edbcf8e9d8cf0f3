"""The StreamApp operator: each StreamApp becomes a fenced Spark driver with a checkpoint volume.

Layers, imported in one direction only (tests/operator/unit/test_layers.py checks it):
``names`` ← ``render`` and ``decide`` (pure) ← ``observe``, ``act``, ``report`` (Kubernetes, Kafka,
HTTP) ← ``reconcile`` ← ``handlers`` (kopf) and the CLIs.
"""
