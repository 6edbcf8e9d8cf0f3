#!/usr/bin/env bash
# Builds the project's images with Docker (run it through docker.sh): a Debian bookworm base made
# by debootstrap from Debian's archive (or BASE_IMAGE), the pause image from a static Go binary,
# and the operator and runtime targets of the top-level Dockerfile. Saves each as a tar under
# $CACHE/images/out for `ctr images import` (re-saved only when the image changed).
# Nothing is pulled: Python wheels come from PyPI through pip, the connector jars from Maven.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
testbed=$(dirname "$here"); repo=$(dirname "$testbed")
CACHE=${CACHE:?}; DOCKER=${DOCKER:?run through docker.sh}
set -a; source "$testbed/versions.env"; set +a
VENV=${VENV:-$CACHE/venv}
# The version is written once: crds/streamapp_api/version.py.
version=$(python3 -c 'import runpy, sys; print(runpy.run_path(sys.argv[1])["__version__"])' "$repo/crds/streamapp_api/version.py")
images=$CACHE/images; out=$images/out
mkdir -p "$images" "$out" "$CACHE/logs"
log=$CACHE/logs/images.log; : >"$log"
step() { printf '>> %s\n' "$*"; }
timed() { local t0=$SECONDS; "$@" >>"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }; step "  done in $((SECONDS - t0))s" >&2; }

# --- base: debootstrap once, cached as a tarball; imported when the engine lacks it.
source "$here/rootfs.sh"
LOCAL_BASE=streamapp.local/debian:bookworm
BASE_IMAGE=${BASE_IMAGE:-$LOCAL_BASE}
if [[ $BASE_IMAGE == "$LOCAL_BASE" ]] && ! "$DOCKER" image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
  if [[ ! -f $images/base-bookworm.tar ]]; then
    step "debootstrap bookworm (log: $log)"; timed make_rootfs "$images/base-bookworm.tar"
  fi
  step "docker import $LOCAL_BASE"; timed "$DOCKER" import "$images/base-bookworm.tar" "$LOCAL_BASE"
fi

# --- the build context: packages, wheels of the pinned requirements, connector jars, image files.
python3 - "$repo/pyproject.toml" "$images" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = project["optional-dependencies"]
for target in ("operator", "runtime"):
    reqs = sorted(set(project["dependencies"]) | set(extras[target]))
    open(f"{sys.argv[2]}/requirements-{target}.txt", "w").write("\n".join(reqs) + "\n")
PY
wheels_key=$(cat "$images"/requirements-*.txt | sha256sum | cut -c1-12)
wheels=$images/wheels-cp311-$wheels_key
if [[ ! -f $wheels/.complete ]]; then
  step "pip wheel (PyPI) -> $wheels"
  rm -rf "$wheels"
  timed "$VENV/bin/pip" wheel -q -w "$wheels" -r "$images/requirements-operator.txt" -r "$images/requirements-runtime.txt"
  touch "$wheels/.complete"
fi
jar_dirs=("$CACHE/jars/spark-kafka-$SPARK_VERSION" "$CACHE/jars/spark-s3-$HADOOP_VERSION-$AWSSDK_VERSION-$S3_ACCELERATOR_VERSION")
for jars in "${jar_dirs[@]}"; do
  [[ -f $jars/.complete ]] || { echo "$jars is missing: run make deps" >&2; exit 1; }
done

ctx=$images/context
rm -rf "$ctx"; mkdir -p "$ctx/src" "$ctx/bin" "$ctx/jars"
cp -al "$wheels" "$ctx/wheels"; rm -f "$ctx/wheels/.complete"
for jars in "${jar_dirs[@]}"; do cp -l "$jars"/*.jar "$ctx/jars/"; done
cp "$images"/requirements-*.txt "$ctx/"
for pkg in crds/streamapp_api operator/streamapp_operator apps/streamapp_runtime; do
  cp -r "$repo/$pkg" "$ctx/src/"
done
find "$ctx/src" -name __pycache__ -prune -exec rm -rf {} +
cp "$here/image/streamapp" "$ctx/bin/"; cp "$here/image/entrypoint.sh" "$here/image/decom.sh" "$ctx/"
cp "$repo/Dockerfile" "$repo/.dockerignore" "$ctx/"

build() {  # build <target> <tag>
  step "docker build --target $1 -> $2 (from $BASE_IMAGE)"
  timed env DOCKER_BUILDKIT=1 "$DOCKER" build --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --target "$1" -t "$2" "$ctx"
}
build operator "streamapp/operator:$version"
build runtime "streamapp/runtime:$version"

# --- pause: a static binary in an otherwise empty image.
pause_dir=$images/pause; mkdir -p "$pause_dir"
if [[ ! -x $pause_dir/pause ]] || [[ $here/image/pause.go -nt $pause_dir/pause ]]; then
  step "go build pause"
  (cd "$here/image" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOCACHE=$CACHE/go/build \
    go build -trimpath -ldflags '-s -w' -o "$pause_dir/pause" .)
fi
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$pause_dir/Dockerfile"
PAUSE_IMAGE=streamapp.local/pause:3.10
timed env DOCKER_BUILDKIT=1 "$DOCKER" build -t "$PAUSE_IMAGE" "$pause_dir"

# --- tars for containerd, re-saved only when the image id changed.
for tag in "$PAUSE_IMAGE" "streamapp/operator:$version" "streamapp/runtime:$version"; do
  name=$(basename "${tag%%:*}")
  id=$("$DOCKER" image inspect -f '{{.Id}}' "$tag")
  if [[ $(cat "$out/$name.id" 2>/dev/null) != "$id" ]]; then
    step "docker save $tag" >&2
    timed "$DOCKER" save -o "$out/$name.tar.tmp" "$tag"
    mv "$out/$name.tar.tmp" "$out/$name.tar"; echo "$id" >"$out/$name.id"
  fi
  printf '%s\t%s\t%s\n' "$tag" "${id:7:12}" "$(du -h "$out/$name.tar" | cut -f1)"
done >"$out/images.tsv"
column -t "$out/images.tsv"
