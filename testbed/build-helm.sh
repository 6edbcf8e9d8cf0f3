#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3/cmd/helm) from the Go module proxy into $CACHE/helm-$HELM_VERSION/bin.
# Idempotent: a finished build leaves a stamp file. helm's go.mod has no replace directives, so a
# plain `go install pkg@version` resolves it; the version is set through -ldflags so that
# `helm version` reports the pinned release.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:?}
CACHE=${CACHE:?}

out=$CACHE/helm-$HELM_VERSION
stamp=$out/.complete
if [[ -f $stamp ]]; then
  exit 0
fi
mkdir -p "$out/bin"

export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# Go keeps its module and build caches inside ours, so one folder holds every heavy artefact.
export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build

echo ">> go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
t0=$SECONDS
GOBIN=$out/bin go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
echo ">> built helm in $((SECONDS - t0))s"
"$out/bin/helm" version --short
touch "$stamp"
