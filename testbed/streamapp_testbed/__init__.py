"""The local test bed: real Kafka, Kubernetes control plane, kwok nodes, Prometheus and Postgres.

Every part is a real process started from binaries that `testbed/bootstrap.sh` installed into the
cache folder, bound to 127.0.0.1 on free ports, and stopped with its whole process group.
"""
