#!/usr/bin/env bash
# Sourced by the scripts of testbed/kind: versions, cache folders, the kind network, and the Docker
# engine kind talks to (our own dockerd, dockerd.sh, never the system's nor the test bed's).
set -euo pipefail
kind_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
testbed=$(dirname "$kind_here"); repo=$(dirname "$testbed")
set -a; source "$testbed/versions.env"; set +a
CACHE=${CACHE:-${STREAMAPP_CACHE:-$HOME/.cache/streamapp}}
mkdir -p "$CACHE/logs"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build

KIND_BIN=$CACHE/kind-$KIND_VERSION/bin/kind
LPP_DIR=$CACHE/local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION
KUBE_DIR=$CACHE/kube-$KUBE_VERSION-kwok-$KWOK_VERSION
# Everything the node image is made of; a new version of any part is a new folder.
NODE_DIR=$CACHE/kind-node-$KUBE_VERSION-kind-$KIND_VERSION-lpp-$LOCAL_PATH_PROVISIONER_VERSION
ROOTFS_DIR=$CACHE/kind-rootfs-bookworm
# KIND_NODE_IMAGE (e.g. kindest/node:v1.34.0): kind's official node image, pulled by kind, on a
# machine whose Docker reaches a registry; unset, the project's own (node-image.sh).
NODE_IMAGE=${KIND_NODE_IMAGE:-streamapp.local/kind-node:$KUBE_VERSION}
CLUSTER_NAME=${KIND_CLUSTER_NAME:-streamapp}

# The network the nodes live on: a fixed name, subnet and bridge (networks.py, which the network
# guard lets through). Read from networks.py so that there is one place for addresses.
read -r KIND_NETWORK KIND_BRIDGE KIND_SUBNET KIND_GATEWAY KIND_POD_CIDR KIND_SERVICE_CIDR < <(python3 - "$testbed/streamapp_testbed/networks.py" <<'PY'
import runpy, sys
n = runpy.run_path(sys.argv[1])
print(*(n[k] for k in ("KIND_NETWORK", "KIND_BRIDGE", "KIND_SUBNET", "KIND_GATEWAY", "KIND_POD_CIDR",
                       "KIND_SERVICE_CIDR")))
PY
)

# Our own Docker engine: own socket, exec root, pid file and data root, so it never meets the test
# bed's (testbed/cluster/docker.sh) nor a system one. Debian's client, whatever else is on PATH:
# kind runs the first `docker` on PATH, so that folder goes first.
KIND_RUN=/run/streamapp-kind-docker
export DOCKER_HOST=unix://$KIND_RUN/docker.sock
export DOCKER=/usr/bin/docker
export PATH=/usr/bin:$PATH

step() { printf '>> %s\n' "$*"; }
