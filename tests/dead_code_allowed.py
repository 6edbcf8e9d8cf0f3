"""Names vulture (tests/unit/test_dead_code.py) reports as unused although something outside our code
reads them. Never imported or run: vulture only sees these attribute reads. A name goes here with the
reason, never a name that is merely unused (delete that one). Framework patterns that hold for every
such name (model_config, kopf handlers, http.server's hooks) are in pyproject.toml's [tool.vulture]."""

# ruff: noqa: B018 (every line is an attribute read for vulture, on purpose)

from http.server import HTTPServer

import kopf
from kubernetes import client
from pyspark.sql.streaming import StreamingQueryListener
from streamapp_api import pods, status
from streamapp_runtime.compile.steps import keyed_state
from streamapp_testbed import networks

# API models: their fields are written to the CRD schema and to status patches, read by users and kubectl.
pods.Toleration.effect
pods.Toleration.toleration_seconds
status.Condition.last_transition_time
status.Condition.observed_generation
status.SinkStatus.input_rows_per_second
status.SinkStatus.processed_rows_per_second
status.SinkStatus.last_progress_time
status.SinkStatus.transactions_aborted
status.SinkStatus.partitions_skipped
status.LastRescale.applied_time
status.ScalingStatus.last_decision_time
status.ScalingStatus.pending_executors
status.StateStatus.last_snapshot
status.StateStatus.last_snapshot_failure
status.RollbackStatus.to_generation
status.RollbackStatus.failed_spec
status.UpgradeStatus.last_stable_generation
status.UpgradeStatus.last_stable_spec
status.UpgradeStatus.pre_snapshot
status.StreamAppStatus.observed_generation

# Spark calls these: transformWithState's StatefulProcessor, the streaming query listener.
keyed_state._RowFold.init
keyed_state._RowFold.handleInputRows
StreamingQueryListener.onQueryStarted
StreamingQueryListener.onQueryProgress
StreamingQueryListener.onQueryIdle
StreamingQueryListener.onQueryTerminated

# Settings the libraries read: kopf's, the Kubernetes client's, http.server's.
kopf.OperatorSettings.persistence.progress_storage
kopf.OperatorSettings.persistence.diffbase_storage
kopf.OperatorSettings.watching.server_timeout
kopf.OperatorSettings.scanning.disabled
kopf.OperatorSettings.admission.managed
client.Configuration.connection_pool_maxsize
client.V1LeaseSpec.lease_duration_seconds
HTTPServer.server_name

# The kind cluster's addresses: testbed/kind/common.sh reads them out of networks.py (one place for
# every address of the test bed); Python reads the others.
networks.KIND_NETWORK
networks.KIND_SERVICE_CIDR
