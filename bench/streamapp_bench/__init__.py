"""Benchmarks of streamapp: the runtime against hand-written Spark, Kafka Streams and a raw consumer
(data plane), and the operator on the test bed's API server with kwok nodes (control plane).

`python -m streamapp_bench` (what `make bench` runs) writes bench/results/<name>.json and renders the
tables between the bench markers of bench/README.md.
"""
