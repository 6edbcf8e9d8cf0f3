#!/usr/bin/env bash
# `make e2e-kind`: the end-to-end tests of tests/e2e on a kind cluster, for machines with Docker,
# kind, helm and internet (e.g. a GitHub Actions runner). Creates the cluster, builds the images
# from a public base, loads them, runs the same tests as `make e2e`, deletes the cluster.
# Kafka and Postgres run on this machine at the kind network's gateway address.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$(dirname "$here")")
CACHE=${CACHE:?}; PYTHON=${PYTHON:?}
name=streamapp-e2e
export DOCKER=${DOCKER:-docker}
for tool in "$DOCKER" kind helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool on PATH" >&2; exit 1; }
done
kubeconfig=$(mktemp)
cleanup() { kind delete cluster --name "$name" >/dev/null 2>&1 || true; rm -f "$kubeconfig"; }
trap cleanup EXIT

BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim} CACHE=$CACHE bash "$here/images.sh"
tag=$(cat "$CACHE/images/out/tag")  # what images.sh built
kind create cluster --name "$name" --kubeconfig "$kubeconfig" --wait 5m
for image in "streamapp/operator:$tag" "streamapp/runtime:$tag"; do
  kind load docker-image --name "$name" "$image"
done
gateway=$("$DOCKER" network inspect kind -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | tr ' ' '\n' | grep -m1 '\.')
subnet=$("$DOCKER" network inspect kind -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' | tr ' ' '\n' | grep -m1 '\.')
cd "$repo"
KUBECONFIG=$kubeconfig STREAMAPP_E2E_CLUSTER=kind STREAMAPP_E2E_HOST=$gateway STREAMAPP_E2E_ALLOW=$subnet \
  "$PYTHON" -m pytest -m e2e tests/e2e "$@"
