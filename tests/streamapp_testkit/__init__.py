"""What the tests share: the test bed's parts as the tests use them, waits and manifests.

One module per kind of test: `runtime` (an app run in-process or as `streamapp run`), `operator_bed`
and `operator_apps` (the operator as a process; example apps as models), `chart_bed` and
`operator_rbac` (the Helm chart), `e2e_clicks` and `e2e_monitors` (a real cluster). `waiting` polls
until something happens; `manifests` builds apps from the examples. Topics are read with
`streamapp_testbed.kafka_admin.read_topic`, which the benchmarks use too.
"""

# The JVM options of every Spark JVM a test starts, local (tests/conftest.py) or in a cluster's pods
# (e2e_clicks.SHORT_LIVED_JVMS): they live seconds to minutes on small inputs, where the C1 compiler
# alone and the serial collector spend far less CPU than the JVM's defaults and change no result.
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
