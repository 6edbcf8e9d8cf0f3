#!/bin/bash
# Entrypoint of the runtime image. Spark on Kubernetes starts each executor pod from the driver's
# image with the single argument `executor` and describes it in the environment (SPARK_DRIVER_URL,
# SPARK_EXECUTOR_ID, ...): that case becomes the JVM command line Spark's own image entrypoint
# builds. Anything else (the driver's `streamapp run ...`, a shell) runs as given. tini is PID 1 so
# that signals reach the JVM and Python workers are reaped.
set -eo pipefail

: "${JAVA_HOME:=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
: "${SPARK_HOME:?SPARK_HOME is not set}"

# Spark needs a passwd entry for the running uid (Hadoop's UserGroupInformation); the image has
# one for 185, an arbitrary runAsUser gets a fake name through NSS_WRAPPER-free fallback.
if ! getent passwd "$(id -u)" >/dev/null 2>&1; then
  export SPARK_USER=${SPARK_USER:-spark}
fi

case "${1:-}" in
  executor)
    shift
    java_opts=()
    for v in "${!SPARK_JAVA_OPT_@}"; do java_opts+=("${!v}"); done
    classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"
    [[ -n ${SPARK_EXTRA_CLASSPATH:-} ]] && classpath+=":$SPARK_EXTRA_CLASSPATH"
    [[ -n ${HADOOP_CONF_DIR:-} ]] && classpath="$HADOOP_CONF_DIR:$classpath"
    classpath+=":$PWD"
    # The driver's classpath when the image's class-data-sharing archive was made, first: the JVM
    # maps the archive only when its classpath starts with that one (apps/streamapp_runtime/class_archive.py).
    if [[ -n ${STREAMAPP_CLASS_ARCHIVE:-} && -f $STREAMAPP_CLASS_ARCHIVE.classpath ]]; then
      classpath="$(<"$STREAMAPP_CLASS_ARCHIVE.classpath"):$classpath"
    fi
    cmd=(
      "$JAVA_HOME/bin/java" "${java_opts[@]}"
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY"
      -cp "$classpath"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}"
      --podName "$SPARK_EXECUTOR_POD_NAME"
      "$@"
    )
    ;;
  driver)
    echo "entrypoint: the driver runs \`streamapp run\` (see docs/runtime-contract.md), not spark-submit" >&2
    exit 2
    ;;
  "")
    cmd=(streamapp --help)
    ;;
  *)
    cmd=("$@")
    ;;
esac
exec /usr/bin/tini -s -- "${cmd[@]}"
