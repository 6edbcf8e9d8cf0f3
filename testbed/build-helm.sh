#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3/cmd/helm) from the Go module proxy into $CACHE/helm-$HELM_VERSION/bin.
# Idempotent: a finished build leaves a stamp file. helm's go.mod has no replace directives, so a
# plain `go install pkg@version` resolves it. -ldflags set what helm's own Makefile sets: its version,
# and the Kubernetes version `helm template` and `helm lint` assume (from the client-go it builds
# with; without it helm assumes v1.20 and refuses charts that need newer).
set -euo pipefail

HELM_VERSION=${HELM_VERSION:?}
CACHE=${CACHE:?}

out=$CACHE/helm-$HELM_VERSION
stamp=$out/.complete
if [[ -f $stamp ]]; then
  exit 0
fi
mkdir -p "$out/bin"

source "$(dirname "${BASH_SOURCE[0]}")/go-env.sh"

gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
client_go=$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod")   # v0.36.2 -> Kubernetes 1.36
kube_minor=$(echo "$client_go" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
done

echo ">> go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
t0=$SECONDS
GOBIN=$out/bin go install -trimpath \
  -ldflags "$ldflags" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
echo ">> built helm in $((SECONDS - t0))s"
"$out/bin/helm" version --short
touch "$stamp"
