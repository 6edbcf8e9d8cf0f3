#!/usr/bin/env bash
# Builds the Kubernetes control plane (kube-apiserver, -controller-manager, -scheduler, kubectl), etcd
# and kwok from the Go module proxy into $CACHE/kube-$KUBE_VERSION-kwok-$KWOK_VERSION/bin.
# `build-kube.sh kind` builds the node binaries (kubelet, kube-proxy, kubeadm) into the same folder,
# for the kind node image (testbed/kind); `make deps` does not need them.
# Idempotent: each finished build leaves its own stamp file (.complete, .kind-complete).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io/* staging module with a
# directory inside the repository. A small wrapper module requires k8s.io/kubernetes and replaces each
# staging module with its published v0.Y.Z tag instead; the list is read from the release's own go.mod.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:?}
KWOK_VERSION=${KWOK_VERSION:?}
CACHE=${CACHE:?}

mode=${1:-control-plane}
out=$CACHE/kube-$KUBE_VERSION-kwok-$KWOK_VERSION
case $mode in
  control-plane) stamp=$out/.complete ;;
  kind) stamp=$out/.kind-complete ;;
  *) echo "usage: $0 [kind]" >&2; exit 2 ;;
esac
if [[ -f $stamp ]]; then
  exit 0
fi

# One build at a time per folder: each rewrites the wrapper's go.mod.
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
[[ -f $stamp ]] && exit 0

source "$(dirname "${BASH_SOURCE[0]}")/go-env.sh"
staging_tag="v0.${KUBE_VERSION#v1.}"   # v1.34.4 -> v0.34.4
minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
work=$out/wrapper
mkdir -p "$work" "$out/bin"
cd "$work"

echo ">> resolving k8s.io/kubernetes@$KUBE_VERSION"
rm -f go.mod go.sum
go mod init streamapp.local/kube-build >/dev/null 2>&1
kube_gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')

# Every `k8s.io/foo => ./staging/src/k8s.io/foo` line of the release's go.mod becomes a replace to the tag.
python3 - "$kube_gomod" "$staging_tag" >>go.mod <<'PY'
import re, sys
gomod, tag = sys.argv[1], sys.argv[2]
text = open(gomod).read()
mods = sorted(set(re.findall(r'^\s*(k8s\.io/[\w.\-/]+)\s+=>\s+\./staging/', text, re.M)))
if not mods:
    sys.exit("no staging replaces found in " + gomod)
print("replace (")
for m in mods:
    print(f"\t{m} => {m} {tag}")
print(")")
PY
etcd_version=$(grep -E '^\s+go\.etcd\.io/etcd/server/v3 ' "$kube_gomod" | awk '{print $2}')
echo ">> etcd pinned by $KUBE_VERSION: $etcd_version"

go get "k8s.io/kubernetes@$KUBE_VERSION" "go.etcd.io/etcd/server/v3@$etcd_version"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() {  # build <binary name> <package>
  if [[ ! -x $out/bin/$1 ]]; then
    echo ">> go build $2"
    local t0=$SECONDS
    go build -trimpath -ldflags "$ldflags" -o "$out/bin/$1.tmp" "$2"
    mv "$out/bin/$1.tmp" "$out/bin/$1"
    echo ">> built $1 in $((SECONDS - t0))s"
  fi
}
if [[ $mode == kind ]]; then
  build kubelet k8s.io/kubernetes/cmd/kubelet
  build kube-proxy k8s.io/kubernetes/cmd/kube-proxy
  build kubeadm k8s.io/kubernetes/cmd/kubeadm
  "$out/bin/kubelet" --version
  touch "$stamp"
  exit 0
fi

build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubectl k8s.io/kubernetes/cmd/kubectl

if [[ ! -x $out/bin/kwok ]]; then
  echo ">> go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  GOBIN=$out/bin go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

"$out/bin/kube-apiserver" --version
"$out/bin/etcd" --version | sed -n 1p
touch "$stamp"
