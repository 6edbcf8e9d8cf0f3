"""What the tests share: the test bed's parts as the tests use them, waits and manifests.

One module per kind of test: `runtime` (an app run in-process or as `streamapp run`), `operator_bed`
and `operator_apps` (the operator as a process; example apps as models), `chart_bed` and
`operator_rbac` (the Helm chart), `e2e_clicks` and `e2e_monitors` (a real cluster). `waiting` polls
until something happens; `manifests` builds apps from the examples. Topics are read with
`streamapp_testbed.kafka_admin.read_topic`, which the benchmarks use too.
"""
