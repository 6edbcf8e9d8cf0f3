#!/usr/bin/env bash
# Builds the test bed's schema registry, AxonOps Schema Registry (a Go server of the Confluent Schema
# Registry REST API, Apache-2.0), from the Go module proxy into
# $CACHE/schema-registry-$SCHEMA_REGISTRY_VERSION/bin. Idempotent: a finished build leaves a stamp.
# Why this one: testbed/versions.env (SCHEMA_REGISTRY_VERSION).
# Not `go install pkg@version`: that asks the proxy for the module's version list (to read a
# deprecation notice), which the proxy reached here refuses for this module while it serves the
# version itself; so the module is downloaded at its version and built in a copy of its folder.
set -euo pipefail

SCHEMA_REGISTRY_VERSION=${SCHEMA_REGISTRY_VERSION:?}
CACHE=${CACHE:?}
module=github.com/axonops/axonops-schema-registry

out=$CACHE/schema-registry-$SCHEMA_REGISTRY_VERSION
stamp=$out/.complete
if [[ -f $stamp ]]; then
  exit 0
fi
mkdir -p "$out/bin"

source "$(dirname "${BASH_SOURCE[0]}")/go-env.sh"

dir=$(go mod download -json "$module@$SCHEMA_REGISTRY_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -r "$dir/." "$src"
chmod -R u+w "$src"   # the module cache is read-only; go build writes nothing there, go.sum updates may

echo ">> go build $module/cmd/schema-registry@$SCHEMA_REGISTRY_VERSION"
t0=$SECONDS
(cd "$src" && go build -trimpath -ldflags "-s -w -X main.version=$SCHEMA_REGISTRY_VERSION" -o "$out/bin/schema-registry" ./cmd/schema-registry)
echo ">> built the schema registry in $((SECONDS - t0))s"
"$out/bin/schema-registry" -version
touch "$stamp"
