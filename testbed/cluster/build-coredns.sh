#!/usr/bin/env bash
# Builds CoreDNS (the single-node cluster's DNS) from the Go module proxy into
# $CACHE/coredns-$COREDNS_VERSION/bin. Idempotent: a finished build leaves a stamp file.
set -euo pipefail
COREDNS_VERSION=${COREDNS_VERSION:?}
CACHE=${CACHE:?}
out=$CACHE/coredns-$COREDNS_VERSION
[[ -f $out/.complete ]] && exit 0
mkdir -p "$out/bin"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build
echo ">> go install github.com/coredns/coredns@$COREDNS_VERSION"
t0=$SECONDS
GOBIN=$out/bin go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
echo ">> built coredns in $((SECONDS - t0))s"
"$out/bin/coredns" -version | head -n1
touch "$out/.complete"
