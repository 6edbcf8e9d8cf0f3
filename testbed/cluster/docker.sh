#!/usr/bin/env bash
# `docker.sh CMD...`: runs CMD with DOCKER (the client) and DOCKER_HOST exported, pointing at a
# Docker engine. When none answers at DOCKER_HOST (default: the system socket), starts Debian's
# dockerd with its own data root under the cache and its own socket, and stops it when CMD ends.
# The engine gets no bridge and touches no iptables: builds use the host's network.
set -euo pipefail
CACHE=${CACHE:?}
export DOCKER=${DOCKER:-/usr/bin/docker}   # Debian's client (docker.io), whatever else is on PATH
run=/run/streamapp-docker

if DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock} "$DOCKER" version >/dev/null 2>&1; then
  export DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
  exec "$@"
fi

export DOCKER_HOST=unix://$run/docker.sock
if "$DOCKER" version >/dev/null 2>&1; then  # ours, left by a concurrent run: use it, leave it
  exec "$@"
fi
mkdir -p "$run" "$CACHE/docker" "$CACHE/logs"
echo ">> starting dockerd (data root $CACHE/docker, log $CACHE/logs/dockerd.log)"
dockerd --data-root "$CACHE/docker" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
  -H "$DOCKER_HOST" --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
  >>"$CACHE/logs/dockerd.log" 2>&1 &
dockerd_pid=$!
stop() {
  kill -TERM "$dockerd_pid" 2>/dev/null || return 0
  for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || return 0; sleep 0.5; done
  kill -KILL "$dockerd_pid" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 120); do
  "$DOCKER" version >/dev/null 2>&1 && break
  kill -0 "$dockerd_pid" 2>/dev/null || { tail -n 20 "$CACHE/logs/dockerd.log"; exit 1; }
  sleep 0.5
done
"$@"
