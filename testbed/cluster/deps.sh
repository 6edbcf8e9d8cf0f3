#!/usr/bin/env bash
# Debian packages the images and the single-node cluster need: Debian's Docker engine (docker.io),
# containerd and runc (the cluster's runtime), the CNI bridge and host-local plugins, iptables and
# conntrack for kube-proxy, debootstrap for the local base image. Idempotent.
set -euo pipefail
CACHE=${CACHE:?}
packages=(docker.io containerd runc containernetworking-plugins iptables conntrack debootstrap)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
echo ">> apt-get install ${missing[*]}"
mkdir -p "$CACHE/logs"
# Keep package scripts from starting system services (dockerd, containerd): we start our own.
policy=/usr/sbin/policy-rc.d
had_policy=0; [[ -e $policy ]] && had_policy=1
((had_policy)) || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$CACHE/logs/apt-cluster.log" 2>&1 \
  || { ((had_policy)) || rm -f "$policy"; cat "$CACHE/logs/apt-cluster.log"; exit 1; }
((had_policy)) || rm -f "$policy"
