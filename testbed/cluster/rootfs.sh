#!/usr/bin/env bash
# Sourced by images.sh and testbed/kind: a Debian bookworm root file system made by debootstrap from
# the host's own Debian archive, saved as a tarball for `docker import`. Nothing is pulled.

debian_mirror() {  # the host's own Debian archive address, from its apt sources
  grep -rhoE '(URIs:|^deb)\s+\S+/debian/?(\s|$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | awk '{print $2}' | head -n1
}

# make_rootfs <tarball> [package,package,...]: minbase plus the packages (and what they depend on;
# debootstrap installs no Recommends), apt lists and downloaded packages removed.
make_rootfs() {
  local tarball=$1 include=${2:-}
  local root; root=$(mktemp -d "$(dirname "$tarball")/rootfs.XXXXXX")
  local mirror=${DEBIAN_MIRROR:-$(debian_mirror)}
  debootstrap --variant=minbase ${include:+--include="$include"} bookworm "$root" "$mirror"
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" >"$root/etc/apt/sources.list"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
  tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
  rm -rf "$root"
  mv "$tarball.tmp" "$tarball"
}
