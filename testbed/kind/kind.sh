#!/usr/bin/env bash
# `kind.sh image|up|down|status`: a kind cluster on this machine, from the project's own builds
# (make kind-up / kind-down). Nothing is pulled: install.sh fetched everything from Debian's archive
# and the Go module proxy; node-image.sh assembles the node image.
#   image  install.sh, our Docker engine (dockerd.sh), node-image.sh (not with KIND_NODE_IMAGE,
#          kind's official image); stops the engine again unless a cluster is up
#   up     image, then the network and `kind create cluster`; prints the kubeconfig path
#   down   `kind delete cluster`, the network, the guard rules, the sysctl; stops the engine
#   load <tar>...  `kind load image-archive` into the node (e.g. $CACHE/images/out/runtime.tar)
#   node <command>...  runs a command in the node container (e.g. `ctr -n k8s.io images ls -q`)
#
# The nodes live on the network `kind` with a fixed subnet and bridge (networks.py), which the
# network guard lets through. While it exists, an iptables rule keeps what the nodes send on the
# bridge or to this host: nothing they send is forwarded elsewhere. A packet for a service address
# that the node's kube-proxy did not rewrite (pods that start before it has written its rules) is
# dropped where it enters the host, before the network guard would report it as leaving. Pods get
# no name server (as on the project's own cluster, nothing in them resolves a name), so no lookup
# leaves the node either. The API server is published on 127.0.0.1 by docker-proxy.
source "$(dirname "$0")/common.sh"
KUBECONFIG_FILE=$CACHE/kind-$CLUSTER_NAME.kubeconfig
GUARD=(FORWARD -i "$KIND_BRIDGE" ! -o "$KIND_BRIDGE" -m comment --comment streamapp-kind -j DROP)
UNREWRITTEN=(PREROUTING -i "$KIND_BRIDGE" -d "$KIND_SERVICE_CIDR" -m comment --comment streamapp-kind -j DROP)
NODE=$CLUSTER_NAME-control-plane
INOTIFY=/proc/sys/fs/inotify/max_user_instances

timed() { local what=$1 t0=$SECONDS; shift; "$@"; step "$what: $((SECONDS - t0))s"; }

cluster_exists() { "$KIND_BIN" get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; }

image() {
  timed "install" bash "$kind_here/install.sh"
  bash "$kind_here/dockerd.sh" start
  if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
    step "node image $NODE_IMAGE: kind's, pulled by kind create cluster"
  else
    timed "node image" bash "$kind_here/node-image.sh"
  fi
}

config() {  # the cluster's kind configuration
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: ipv4
  apiServerAddress: 127.0.0.1
  # kindnetd is not on the Go module proxy: our node image has a static ptp configuration instead
  # (kind's own image, KIND_NODE_IMAGE, brings kindnetd).
  disableDefaultCNI: $([[ -n ${KIND_NODE_IMAGE:-} ]] && echo false || echo true)
  podSubnet: $KIND_POD_CIDR
  serviceSubnet: $KIND_SERVICE_CIDR
  # nft only in kube-proxy: no choice between iptables' legacy and nft back ends in the node.
  kubeProxyMode: nftables
nodes:
  - role: control-plane
    extraMounts:
      - {hostPath: $KIND_RUN/kubeadm-patches, containerPath: /etc/streamapp/kubeadm-patches, readOnly: true}
containerdConfigPatches:
  # Lowering a process's OOM score needs CAP_SYS_RESOURCE, which this machine's bounding set lacks.
  - |-
    [plugins."io.containerd.grpc.v1.cri"]
      restrict_oom_score_adj = true
kubeadmConfigPatches:
  # No CoreDNS: not built (node-image.sh); the project's own cluster has no cluster DNS either.
  # The control plane's static pods ask for no CPU (kubeadm-patches below): their 650m of requests
  # leave a 2-core node no room for a driver and two executors, which the end-to-end tests size for.
  - |
    kind: InitConfiguration
    skipPhases: [preflight, addon/coredns]
    patches: {directory: /etc/streamapp/kubeadm-patches}
  # ... and pods get no name server: an empty resolvConf turns lookups off.
  - |
    kind: KubeletConfiguration
    clusterDNS: []
    resolvConf: ""
EOF
}

kubeadm_patches() {  # JSON patches kubeadm applies to the control plane's static pods
  local dir=$KIND_RUN/kubeadm-patches component
  mkdir -p "$dir"
  for component in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    echo '[{"op": "remove", "path": "/spec/containers/0/resources/requests/cpu"}]' >"$dir/$component+json.json"
  done
}

up() {
  image
  if cluster_exists; then step "cluster $CLUSTER_NAME is up (KUBECONFIG=$KUBECONFIG_FILE)"; return 0; fi
  # kind's known issue: several systemd and kubelet instances exhaust the default 128.
  if (($(cat "$INOTIFY") < 512)); then
    [[ -f $KIND_RUN/inotify ]] || cat "$INOTIFY" >"$KIND_RUN/inotify"
    echo 512 >"$INOTIFY"
  fi
  # kind bind-mounts /lib/modules; this kernel has no modules folder (Docker would make it anyway).
  if [[ ! -e /lib/modules ]]; then mkdir /lib/modules; touch "$KIND_RUN/lib-modules"; fi
  if ! "$DOCKER" network inspect "$KIND_NETWORK" >/dev/null 2>&1; then
    "$DOCKER" network create --driver bridge --subnet "$KIND_SUBNET" --gateway "$KIND_GATEWAY" \
      -o com.docker.network.bridge.name="$KIND_BRIDGE" -o com.docker.network.bridge.enable_ip_masquerade=false \
      "$KIND_NETWORK" >/dev/null
  fi
  iptables -C "${GUARD[@]}" 2>/dev/null || iptables -I "${GUARD[0]}" 1 "${GUARD[@]:1}"
  iptables -t raw -C "${UNREWRITTEN[@]}" 2>/dev/null || iptables -t raw -I "${UNREWRITTEN[0]}" 1 "${UNREWRITTEN[@]:1}"
  kubeadm_patches
  config >"$KIND_RUN/kind.yaml"
  local t0=$SECONDS
  "$KIND_BIN" create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --config "$KIND_RUN/kind.yaml" \
    --kubeconfig "$KUBECONFIG_FILE" --wait 5m
  step "kind create cluster: $((SECONDS - t0))s"
  # Pods are reached from this host as on any cluster's network (Prometheus scrapes them), through
  # the node; the route goes with the bridge.
  local node_ip
  node_ip=$("$DOCKER" inspect -f "{{(index .NetworkSettings.Networks \"$KIND_NETWORK\").IPAddress}}" "$NODE")
  ip route replace "$KIND_POD_CIDR" via "$node_ip" dev "$KIND_BRIDGE"
  step "KUBECONFIG=$KUBECONFIG_FILE DOCKER_HOST=$DOCKER_HOST (kind and docker by hand: Debian's /usr/bin/docker)"
}

down() {
  if "$DOCKER" version >/dev/null 2>&1; then
    if cluster_exists; then
      timed "kind delete cluster" "$KIND_BIN" delete cluster --name "$CLUSTER_NAME" --kubeconfig "$KUBECONFIG_FILE"
    fi
    "$DOCKER" network rm "$KIND_NETWORK" >/dev/null 2>&1 || true
  fi
  while iptables -D "${GUARD[@]}" 2>/dev/null; do :; done
  while iptables -t raw -D "${UNREWRITTEN[@]}" 2>/dev/null; do :; done
  if [[ -f $KIND_RUN/inotify ]]; then cat "$KIND_RUN/inotify" >"$INOTIFY"; rm -f "$KIND_RUN/inotify"; fi
  rm -f "$KUBECONFIG_FILE"
  if [[ -f $KIND_RUN/lib-modules ]]; then rmdir /lib/modules 2>/dev/null || true; fi
  bash "$kind_here/dockerd.sh" stop
}

case ${1:-} in
  image) image
    cluster_exists || bash "$kind_here/dockerd.sh" stop ;;
  up) up ;;
  down) down ;;
  config) config ;;
  load) shift
    for tar; do "$KIND_BIN" load image-archive --name "$CLUSTER_NAME" "$tar"; done ;;
  node) shift; "$DOCKER" exec "$NODE" "$@" ;;
  status) bash "$kind_here/dockerd.sh" status && "$KIND_BIN" get clusters ;;
  *) echo "usage: $0 image|up|down|status|config|load <tar>...|node <command>..." >&2; exit 2 ;;
esac
