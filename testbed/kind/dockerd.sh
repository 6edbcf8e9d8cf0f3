#!/usr/bin/env bash
# `dockerd.sh start|stop|status`: the Docker engine of the kind cluster, Debian's dockerd with its own
# socket, exec root, pid file and data root ($CACHE/kind-docker), never the system's nor the test
# bed's (testbed/cluster/docker.sh). No default bridge, and no iptables or ip_forward changes: the
# nodes' network (up.sh) is reached from the host directly, the API server through docker-proxy on
# 127.0.0.1.
#
# The runtime is chosen by a probe at each start: kind's nodes are `--privileged`, and Docker 20.10
# asks runc for every capability it knows, while this machine's bounding set lacks some
# (CAP_SYS_RESOURCE): runc then fails with "apply caps: operation not permitted". When a privileged
# container fails with runc and starts with kind-runc (runc minus the capabilities the host cannot
# give), dockerd is restarted with kind-runc as its default runtime.
source "$(dirname "$0")/common.sh"
data=$CACHE/kind-docker
log=$CACHE/logs/kind-dockerd.log
pidfile=$KIND_RUN/dockerd.pid

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

launch() {  # launch <default runtime>
  mkdir -p "$KIND_RUN" "$data"
  # setsid: its own process group and session, so the shell that started it can end.
  setsid dockerd --data-root "$data" --exec-root "$KIND_RUN/exec" --pidfile "$pidfile" \
    -H "$DOCKER_HOST" --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
    --add-runtime "kind-runc=$kind_here/kind-runc" --default-runtime "$1" \
    >>"$log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 120); do
    "$DOCKER" version >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; return 1; }
    sleep 0.5
  done
  echo "dockerd did not answer on $DOCKER_HOST (log: $log)" >&2; return 1
}

stop() {
  if running; then
    local pid; pid=$(cat "$pidfile")
    kill -TERM "$pid"
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # The run folder (exec root, kind.yaml, the probe's verdict), once nothing is mounted there; grep
  # without -q reads to the end (an early exit fails findmnt with SIGPIPE under pipefail).
  findmnt -rn -o TARGET | grep "^$KIND_RUN" >/dev/null || rm -rf "$KIND_RUN"
}

# probe <runtime>: does a privileged container start with it? The image: the host's own /bin/true
# and the libraries it loads, imported once.
PROBE_IMAGE=streamapp.local/kind-probe:true
probe() {
  if ! "$DOCKER" image inspect "$PROBE_IMAGE" >/dev/null 2>&1; then
    (echo /bin/true; ldd /bin/true | grep -o '/[^ ]*') | sort -u | sed 's|^/||' \
      | tar -C / --dereference -cf - -T - | "$DOCKER" import - "$PROBE_IMAGE" >/dev/null
  fi
  "$DOCKER" run --rm --privileged --network none --runtime "$1" "$PROBE_IMAGE" /bin/true >>"$log" 2>&1
}

case ${1:-} in
  start)
    if running; then exit 0; fi
    step "dockerd for kind (socket $DOCKER_HOST, data root $data, log $log)"
    launch runc
    if probe runc; then
      echo runc >"$KIND_RUN/runtime"
      step "runtime: runc (a privileged container starts with it)"
    else
      probe kind-runc || { echo "a privileged container starts with neither runc nor kind-runc (log: $log)" >&2; stop; exit 1; }
      step "runtime: kind-runc (runc fails a privileged container here; kind-runc drops what the host lacks)"
      stop; launch kind-runc; echo kind-runc >"$KIND_RUN/runtime"
    fi ;;
  stop) stop ;;
  status) running && echo "running (pid $(cat "$pidfile"), runtime $(cat "$KIND_RUN/runtime" 2>/dev/null))" || { echo stopped; exit 1; } ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
