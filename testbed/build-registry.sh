#!/usr/bin/env bash
# Builds the CNCF Distribution registry (github.com/distribution/distribution/v3/cmd/registry) from
# the Go module proxy into $CACHE/registry-$REGISTRY_VERSION/bin: the registry `make push` is tested
# against (tests/integration/test_push.py), since no other registry is reachable here. Idempotent.
set -euo pipefail
REGISTRY_VERSION=${REGISTRY_VERSION:?}
CACHE=${CACHE:?}
out=$CACHE/registry-$REGISTRY_VERSION
[[ -f $out/.complete ]] && exit 0
mkdir -p "$out/bin"
source "$(dirname "${BASH_SOURCE[0]}")/go-env.sh"
echo ">> go install github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
t0=$SECONDS
GOBIN=$out/bin go install -trimpath -ldflags "-s -w" "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
echo ">> built the registry in $((SECONDS - t0))s"
touch "$out/.complete"
