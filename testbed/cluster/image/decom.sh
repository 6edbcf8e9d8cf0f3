#!/bin/bash
# The executor's preStop hook (Spark adds it to executor pods when spark.decommission.enabled is
# true; spark.kubernetes.decommission.script names it, /opt/decom.sh by default). It tells the
# executor JVM to decommission (SIGPWR: no new tasks, running ones finish, shuffle blocks move to
# the other executors) and waits for it to exit; the kubelet sends SIGTERM once this returns, or
# SIGKILL at the pod's terminationGracePeriodSeconds, whichever comes first.
set -u
pid=$(pgrep -o -f org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend) || exit 0
echo "decommissioning executor (pid $pid)"
kill -s PWR "$pid" || exit 0
while kill -0 "$pid" 2>/dev/null; do sleep 1; done
echo "executor exited"
