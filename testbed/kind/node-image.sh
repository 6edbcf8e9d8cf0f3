#!/usr/bin/env bash
# Builds the kind node image $NODE_IMAGE with our Docker engine (dockerd.sh) from what the registries
# give, as `kind build node-image` would from images it pulls (no image can be pulled here):
# - a Debian bookworm root file system by debootstrap (testbed/cluster/rootfs.sh) with systemd and
#   Debian's containerd, runc and CNI plugins, plus kind's entrypoint and systemd units from the kind
#   module in the Go module cache (images/base/files);
# - kubeadm, kubelet and kubectl of KUBE_VERSION (testbed/build-kube.sh);
# - preloaded into the node's containerd under the tags kubeadm asks for: kube-apiserver,
#   -controller-manager, -scheduler and -proxy of KUBE_VERSION, the project's etcd build, and the
#   project's pause; the local-path-provisioner (the default StorageClass) and its helper;
# - a static CNI configuration (ptp), as kindnetd is not on the Go module proxy: the cluster is made
#   with disableDefaultCNI (kind.yaml).
# No CoreDNS: nothing in a StreamApp's pods resolves a name, and no image can be pulled; kind.yaml
# skips kubeadm's addon/coredns phase. Rebuilds only what changed (the folders are named after the
# versions; each image is rebuilt when its inputs' checksum changed).
source "$(dirname "$0")/common.sh"
source "$testbed/cluster/rootfs.sh"
"$DOCKER" version >/dev/null 2>&1 || { echo "no Docker engine at $DOCKER_HOST: run dockerd.sh start" >&2; exit 1; }
log=$CACHE/logs/kind-node-image.log; : >"$log"
timed() { local t0=$SECONDS; "$@" >>"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }; step "  done in $((SECONDS - t0))s"; }
kube_bin=$KUBE_DIR/bin
for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do
  [[ -x $kube_bin/$b ]] || { echo "$kube_bin/$b is missing: run testbed/kind/install.sh" >&2; exit 1; }
done
kind_files=$GOMODCACHE/sigs.k8s.io/kind@$KIND_VERSION/images/base/files
[[ -d $kind_files ]] || { echo "$kind_files is missing: run testbed/kind/install.sh" >&2; exit 1; }
mkdir -p "$ROOTFS_DIR" "$NODE_DIR"

# --- root file systems: the node's (kind's base packages, less the network storage ones, plus
# Debian's container runtime), and a slim one for the component images (kube-proxy needs nft).
NODE_PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins
SLIM_PACKAGES=iptables,nftables,conntrack
rootfs() {  # rootfs <name> <packages> <image>: debootstrap once (cached), import when missing
  local tar=$ROOTFS_DIR/$1-$(sha256sum <<<"$2" | cut -c1-12).tar
  if [[ ! -f $tar ]]; then
    step "debootstrap bookworm $1 (log: $log)"; timed make_rootfs "$tar" "$2"
  fi
  local id; id=$(stat -c '%n %s %Y' "$tar" | sha256sum | cut -c1-12)
  if [[ $("$DOCKER" image inspect -f '{{index .Config.Labels "streamapp.rootfs"}}' "$3" 2>/dev/null) != "$id" ]]; then
    step "docker import $3"
    timed "$DOCKER" import -c "LABEL streamapp.rootfs=$id" \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$tar" "$3"
  fi
}
rootfs node "$NODE_PACKAGES" streamapp.local/kind-rootfs:node
rootfs slim "$SLIM_PACKAGES" streamapp.local/kind-rootfs:slim

# build <tag> <context>: docker build, skipped when the image of the same context exists.
build() {
  local tag=$1 ctx=$2 sum base base_id=
  base=$(awk '/^FROM/ {print $2; exit}' "$ctx/Dockerfile")
  [[ $base == scratch ]] || base_id=$("$DOCKER" image inspect -f '{{.Id}}' "$base")
  sum=$( { (cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum); echo "$base_id"; } | sha256sum | cut -c1-12)
  if [[ $("$DOCKER" image inspect -f '{{index .Config.Labels "streamapp.context"}}' "$tag" 2>/dev/null) == "$sum" ]]; then
    return 0
  fi
  step "docker build $tag"
  timed "$DOCKER" build --network none --label "streamapp.context=$sum" -t "$tag" "$ctx"
}
ctxs=$NODE_DIR/contexts; rm -rf "$ctxs"; mkdir -p "$ctxs"
put() { cp -l "$@" 2>/dev/null || cp "$@"; }  # hard links where the cache allows: binaries are large

# --- the images kubeadm asks for, under its tags (`kubeadm config images list`), and the pause
# image under the tag of the node's containerd configuration (sandbox_image) too.
mapfile -t wanted < <("$kube_bin/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null)
((${#wanted[@]})) || { echo "kubeadm config images list named no image" >&2; exit 1; }
sandbox=$(sed -n 's/^ *sandbox_image *= *"\(.*\)"/\1/p' "$kind_files/etc/containerd/config.toml")
preload=()
for image in "${wanted[@]}"; do
  name=${image##*/}; name=${name%%:*}
  case $name in
    kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|etcd)
      mkdir -p "$ctxs/$name"; put "$kube_bin/$name" "$ctxs/$name/"
      printf 'FROM streamapp.local/kind-rootfs:slim\nCOPY %s /usr/local/bin/%s\n' "$name" "$name" >"$ctxs/$name/Dockerfile"
      build "$image" "$ctxs/$name"; preload+=("$image") ;;
    coredns) ;;  # not built: kind.yaml skips the addon
    pause)
      # Built again only when its source changes (by content: a fresh clone's files are all new), and
      # without the commit stamped in (-buildvcs=false): the same binary gives the same image, so the
      # node image is not preloaded again after every commit.
      pause_bin=$NODE_DIR/pause/pause
      pause_src=$(cat "$testbed/cluster/image/pause.go" "$testbed/cluster/image/go.mod" | sha256sum | cut -c1-12)
      if [[ ! -x $pause_bin || ! -f $pause_bin.$pause_src ]]; then
        step "go build pause"; mkdir -p "$(dirname "$pause_bin")"
        (cd "$testbed/cluster/image" && go build -trimpath -buildvcs=false -ldflags '-s -w' -o "$pause_bin" .)
        rm -f "$pause_bin".*; touch "$pause_bin.$pause_src"
      fi
      mkdir -p "$ctxs/pause"; put "$pause_bin" "$ctxs/pause/"
      printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctxs/pause/Dockerfile"
      build "$image" "$ctxs/pause"; preload+=("$image")
      if [[ $sandbox != "$image" ]]; then "$DOCKER" tag "$image" "$sandbox"; preload+=("$sandbox"); fi ;;
    *) echo "kubeadm asks for $image, which this script does not build" >&2; exit 1 ;;
  esac
done

# --- the default StorageClass: local-path-provisioner, its manifest made from the module's own
# (deploy/local-path-storage.yaml) the way kind's node image has it: class `standard`, the default,
# tolerating the control plane, volumes under /var/local-path-provisioner (the node's /var volume).
LPP_IMAGE=streamapp.local/local-path-provisioner:$LOCAL_PATH_PROVISIONER_VERSION
LPP_HELPER=streamapp.local/local-path-helper:bookworm
mkdir -p "$ctxs/local-path-provisioner"; put "$LPP_DIR/bin/local-path-provisioner" "$ctxs/local-path-provisioner/"
printf 'FROM streamapp.local/kind-rootfs:slim\nCOPY local-path-provisioner /usr/local/bin/\n' >"$ctxs/local-path-provisioner/Dockerfile"
build "$LPP_IMAGE" "$ctxs/local-path-provisioner"
"$DOCKER" tag streamapp.local/kind-rootfs:slim "$LPP_HELPER"  # the helper runs sh, mkdir and rm
preload+=("$LPP_IMAGE" "$LPP_HELPER")
manifests=$ctxs/node/kind/manifests; mkdir -p "$manifests"
python3 "$kind_here/storage_manifest.py" "$GOMODCACHE/github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION/deploy/local-path-storage.yaml" \
  "$LPP_IMAGE" "$LPP_HELPER" >"$manifests/default-storage.yaml"

# --- the node's base: rootfs + kind's files + our binaries and CNI configuration.
node=$ctxs/node
cp -r "$kind_files/." "$node/"
chmod -R u=rwX,go=rX "$node"; chmod 0755 "$node"/usr/local/bin/* "$node"/kind/bin/*
mkdir -p "$node/usr/bin" "$node/etc/cni/net.d"
put "$kube_bin/kubeadm" "$kube_bin/kubelet" "$kube_bin/kubectl" "$node/usr/bin/"
if [[ -x $CACHE/cri-tools-$CRICTL_VERSION/bin/crictl ]]; then
  mkdir -p "$node/usr/local/bin"; put "$CACHE/cri-tools-$CRICTL_VERSION/bin/crictl" "$node/usr/local/bin/"
fi
printf '%s' "$KUBE_VERSION" >"$node/kind/version"
# The pods' network, in place of kindnetd: one node, one range; ptp gives each pod a veth to the
# node, and what leaves the node is masqueraded to the node's address.
cat >"$node/etc/cni/net.d/10-streamapp-ptp.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "streamapp-kind",
  "plugins": [
    {"type": "ptp", "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$KIND_POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
cp "$kind_here/node-setup.sh" "$node/node-setup.sh"
cat >"$node/Dockerfile" <<'EOF'
FROM streamapp.local/kind-rootfs:node
# systemd in a container: it checks `container`, and stops on SIGRTMIN+3 (SIGTERM re-executes it).
ENV container=docker
STOPSIGNAL SIGRTMIN+3
COPY . /
RUN sh /node-setup.sh && rm /node-setup.sh /Dockerfile
EOF
build streamapp.local/kind-base:"$KUBE_VERSION" "$node"

# --- preload: containerd inside a container of the base (unprivileged: nothing is unpacked), the
# images imported from one `docker save`, then committed as the node image.
images_tar=$NODE_DIR/images.tar
sum=$(for image in "${preload[@]}" streamapp.local/kind-base:"$KUBE_VERSION"; do
  "$DOCKER" image inspect -f "$image {{.Id}}" "$image"; done | sha256sum | cut -c1-12)
if [[ $("$DOCKER" image inspect -f '{{index .Config.Labels "streamapp.preload"}}' "$NODE_IMAGE" 2>/dev/null) == "$sum" ]]; then
  step "$NODE_IMAGE is up to date"; exit 0
fi
step "preloading ${#preload[@]} images into $NODE_IMAGE"
t0=$SECONDS
"$DOCKER" save -o "$images_tar" "${preload[@]}"
builder=streamapp-kind-build-$$
trap '"$DOCKER" rm -f "$builder" >/dev/null 2>&1 || true' EXIT
"$DOCKER" run -d --name "$builder" --network none --entrypoint sleep streamapp.local/kind-base:"$KUBE_VERSION" infinity >>"$log"
"$DOCKER" cp "$images_tar" "$builder:/images.tar"
"$DOCKER" exec "$builder" bash -euc '
  nohup containerd >/dev/null 2>&1 &
  for i in $(seq 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  ctr -n k8s.io images import --all-platforms --no-unpack --digests /images.tar
  for ref in $(ctr -n k8s.io images list -q); do ctr -n k8s.io images label "$ref" io.cri-containerd.pinned=pinned >/dev/null; done
  ctr -n k8s.io images list -q
  pkill containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done
  rm /images.tar' >>"$log" 2>&1 || { tail -n 30 "$log" >&2; exit 1; }
"$DOCKER" commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change "LABEL streamapp.preload=$sum" "$builder" "$NODE_IMAGE" >>"$log"
rm -f "$images_tar"
step "  done in $((SECONDS - t0))s"
"$DOCKER" image ls "$NODE_IMAGE"
