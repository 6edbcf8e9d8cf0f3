#!/usr/bin/env bash
# Debian packages the images and the kind cluster need: Debian's Docker engine (docker.io, which
# brings containerd), runc (testbed/kind/kind-runc runs /usr/bin/runc), iptables (the kind network's
# rules in testbed/kind/kind.sh, and the network guard), debootstrap for the local base image and
# the kind node's root file system. Idempotent.
set -euo pipefail
CACHE=${CACHE:?}
packages=(docker.io runc iptables debootstrap)
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
