"""How many executors an app runs, and how a new count reaches its driver. Pure.

- ``partitions``: the count from the source partitions (or spec.executors), and its debounce.
- ``autoscale``: scaling.mode load, the count from the load the driver measures.
- ``load``: scaling.mode load in one reconcile (status.scaling and its event).
- ``pending``: executors waiting for a node (the Scaling condition).
- ``rescale``: in place, by a restart, or by a restart after an in-place rescale was not applied.

What they remember between reconciles is in ``decide/scaling_memory.py``, beside this package: ``world``
imports it, and this package imports ``world``.
"""
