#!/bin/sh
# Run once in the node image's build (node-image.sh): what kind's base image Dockerfile does, for
# Debian's containerd, runc and CNI plugins instead of the ones kind builds.
set -eu
# kind's units and containerd configuration look in /usr/local/bin and /opt/cni/bin.
for b in containerd containerd-shim-runc-v2 ctr; do ln -sf "/usr/bin/$b" "/usr/local/bin/$b"; done
mkdir -p /opt/cni/bin
for p in /usr/lib/cni/*; do ln -sf "$p" /opt/cni/bin/; done
# Only the services the node needs: no udev, getty, tmpfiles at boot; no kernel log in the journal.
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>/etc/systemd/journald.conf
ln -sf /lib/systemd/systemd /sbin/init
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests
# The pods' base OCI spec: containerd's default less rlimits, with kind's hook that mounts the
# node's product_uuid.
ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json
containerd --version; runc --version | head -n1; kubelet --version
