#!/usr/bin/env bash
# Builds Karpenter's kwok provider (sigs.k8s.io/karpenter/kwok: Karpenter's core controllers with a
# cloud provider that makes kwok Nodes) from the Go module proxy into $CACHE/karpenter-$KARPENTER_VERSION/bin:
# the node autoscaler of the operator's test bed (tests/operator/test_operator_nodes.py). Its CRDs
# (NodePool, NodeClaim, KWOKNodeClass) are read from the module in Go's cache at run time
# (streamapp_testbed.karpenter), never copied into this repository. Idempotent: a stamp file.
set -euo pipefail
KARPENTER_VERSION=${KARPENTER_VERSION:?}
CACHE=${CACHE:?}
out=$CACHE/karpenter-$KARPENTER_VERSION
[[ -f $out/.complete ]] && exit 0
mkdir -p "$out/bin"
source "$(dirname "${BASH_SOURCE[0]}")/go-env.sh"
echo ">> go install sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION"
t0=$SECONDS
GOBIN=$out/bin go install -trimpath -ldflags "-s -w" "sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION"
mv "$out/bin/kwok" "$out/bin/karpenter-kwok"
echo ">> built karpenter-kwok in $((SECONDS - t0))s"
# where the CRDs are read from at run time
go mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' >"$out/module-dir"
touch "$out/.complete"
