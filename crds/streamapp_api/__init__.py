"""The StreamApp API: pydantic models (the single source of truth), validation, and CRD generation.

Import-light on purpose: no pyspark, no kopf, no Kubernetes client. The operator and the runtime
both build on it.
"""

from . import contract
from .document import load, parse, validate
from .durations import parse_duration, parse_quantity, spark_interval, spark_memory, spark_memory_mib
from .errors import InvalidSpec, Issue
from .expressions import expression_sites, functions_in
from .policy import Policy, check_policy
from .resolve import Resolved, resolve
from .sinks import KafkaSink, PostgresSink, Sink
from .sources import METADATA_COLUMNS, Kafka, Source, Table
from .spec import (
    API_VERSION, GROUP, KIND, PLURAL, SHORT_NAMES, VERSION, Stream, StreamApp, StreamAppSpec,
)
from .status import Condition, SinkStatus, StreamAppStatus
from .steps import Accumulate, Aggregate, Dedupe, Explode, Join, Step, Window

__all__ = [
    "contract",
    "API_VERSION", "GROUP", "KIND", "PLURAL", "SHORT_NAMES", "VERSION", "METADATA_COLUMNS",
    "Accumulate", "Aggregate", "Condition", "Dedupe", "Explode", "InvalidSpec", "Issue", "Join",
    "Kafka", "KafkaSink", "Policy", "check_policy", "PostgresSink", "Sink", "SinkStatus", "Source", "Step", "Stream",
    "StreamApp", "StreamAppSpec", "StreamAppStatus", "Table", "Window",
    "Resolved", "resolve", "expression_sites", "functions_in", "load", "parse", "validate", "parse_duration", "parse_quantity", "spark_interval",
    "spark_memory", "spark_memory_mib",
]
