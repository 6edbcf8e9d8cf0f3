#!/usr/bin/env bash
# `smoke.sh` (make kind-smoke): proves the kind cluster of kind.sh up works, with times: the node is
# Ready; a pod of a preloaded image runs; a claim with no storageClassName is bound by the default
# class (local-path-provisioner) and its pod writes to it; an image built here and loaded by
# `kind load docker-image` runs. Removes what it created; the cluster stays up.
source "$(dirname "$0")/common.sh"
export KUBECONFIG=$CACHE/kind-$CLUSTER_NAME.kubeconfig
kubectl=$KUBE_DIR/bin/kubectl
ns=kind-smoke
helper=streamapp.local/local-path-helper:bookworm
timed() { local what=$1 t0=$SECONDS; shift; "$@"; step "$what: $((SECONDS - t0))s"; }
cleanup() { "$kubectl" delete namespace "$ns" --wait=true --timeout=120s >/dev/null 2>&1 || true; }
trap cleanup EXIT

timed "node Ready" "$kubectl" wait --for=condition=Ready node --all --timeout=180s
"$kubectl" get nodes -o wide
"$kubectl" create namespace "$ns" >/dev/null
# A new namespace has no service account for its pods until the controller manager makes one.
for _ in $(seq 120); do "$kubectl" -n "$ns" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done

pod() {  # pod <name> <image> <command> [claim]: a pod that never pulls
  local volumes="" mounts=""
  if [[ ${4:-} ]]; then
    mounts="volumeMounts: [{name: data, mountPath: /data}]"
    volumes="volumes: [{name: data, persistentVolumeClaim: {claimName: $4}}]"
  fi
  "$kubectl" -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: $2
      imagePullPolicy: Never
      command: ["sh", "-c", "$3"]
      $mounts
  $volumes
EOF
}

pod preloaded "$helper" "echo preloaded image runs; sleep 3600"
timed "pod of a preloaded image Running" "$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Running pod/preloaded --timeout=120s
"$kubectl" -n "$ns" logs preloaded

"$kubectl" -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
EOF
pod writer "$helper" "echo written >/data/proof && cat /data/proof" data
timed "claim with no storageClassName Bound" "$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Bound pvc/data --timeout=180s
timed "its pod Succeeded" "$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/writer --timeout=120s
"$kubectl" -n "$ns" get pvc data -o custom-columns=NAME:.metadata.name,STATUS:.status.phase,CLASS:.spec.storageClassName,VOLUME:.spec.volumeName
"$kubectl" -n "$ns" logs writer

# An image built on this machine (FROM a local image: nothing pulled), loaded into the node.
ctx=$(mktemp -d); trap 'cleanup; rm -rf "$ctx"' EXIT
printf 'FROM %s\nRUN echo "loaded by kind load docker-image" >/proof\n' "$helper" >"$ctx/Dockerfile"
"$DOCKER" build -q --network none -t streamapp.local/kind-smoke:latest "$ctx" >/dev/null
timed "kind load docker-image" "$KIND_BIN" load docker-image --name "$CLUSTER_NAME" streamapp.local/kind-smoke:latest
pod loaded streamapp.local/kind-smoke:latest "cat /proof"
timed "pod of the loaded image Succeeded" "$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/loaded --timeout=120s
"$kubectl" -n "$ns" logs loaded
"$DOCKER" rmi streamapp.local/kind-smoke:latest >/dev/null
timed "cleanup" cleanup
step "kind smoke test passed"
