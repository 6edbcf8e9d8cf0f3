#!/usr/bin/env bash
# Everything kind-up needs, from Debian's archive and the Go module proxy, into the cache (folders
# named after versions; a stamp per finished build, so a warm run returns in seconds):
# Debian's Docker engine and debootstrap (testbed/cluster/deps.sh), the kind CLI, the
# local-path-provisioner, crictl, and Kubernetes' control plane, etcd, kubelet, kube-proxy and kubeadm
# (testbed/build-kube.sh). Downloads happen here only: nothing later fetches anything.
source "$(dirname "$0")/common.sh"
source "$testbed/go-env.sh"

bash "$testbed/cluster/deps.sh"

gobuild() {  # gobuild <folder> <module@version>: `go install` into <folder>/bin, once
  local dir=$1 mod=$2
  [[ -f $dir/.complete ]] && return 0
  step "go install $mod -> $dir/bin"
  local t0=$SECONDS
  mkdir -p "$dir/bin"
  GOBIN=$dir/bin go install -trimpath -ldflags '-s -w' "$mod"
  touch "$dir/.complete"
  step "  done in $((SECONDS - t0))s"
}
gobuild "$CACHE/kind-$KIND_VERSION" "sigs.k8s.io/kind@$KIND_VERSION"
modes=(control-plane)
if [[ -z ${KIND_NODE_IMAGE:-} ]]; then  # the node image is assembled here: its parts too
  gobuild "$LPP_DIR" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION"
  gobuild "$CACHE/cri-tools-$CRICTL_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  modes+=(kind)
fi

for mode in "${modes[@]}"; do  # each returns at once when its stamp is there
  t0=$SECONDS
  bash "$testbed/build-kube.sh" "$mode" >"$CACHE/logs/kube-build-$mode.log" 2>&1 \
    || { tail -n 30 "$CACHE/logs/kube-build-$mode.log"; exit 1; }
  ((SECONDS - t0 < 5)) || step "build-kube.sh $mode: $((SECONDS - t0))s (log: $CACHE/logs/kube-build-$mode.log)"
done
"$KIND_BIN" version
