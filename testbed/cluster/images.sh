#!/usr/bin/env bash
# Builds the project's images with Docker (run it through docker.sh): a Debian bookworm base made
# by debootstrap from Debian's archive (or BASE_IMAGE), and the operator and runtime targets of the
# top-level Dockerfile. Saves each as a tar under $CACHE/images/out for `kind load image-archive`
# (re-saved only when the image changed).
# Nothing is pulled: inside the build, pip reads PyPI and Maven reads Maven Central.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
testbed=$(dirname "$here"); repo=$(dirname "$testbed")
CACHE=${CACHE:?}; DOCKER=${DOCKER:?run through docker.sh}
set -a; source "$testbed/versions.env"; set +a
# The version is written once: crds/streamapp_api/version.py. The tag adds the commit, so that each
# change gets images of its own (nodes with imagePullPolicy IfNotPresent, `helm upgrade`); `-dirty`
# when the checkout has uncommitted changes. TAG=... overrides. Written to $out/tag for the test bed,
# `make push` and the e2e fixtures.
version=$(python3 -c 'import runpy, sys; print(runpy.run_path(sys.argv[1])["__version__"])' "$repo/crds/streamapp_api/version.py")
if [[ -z ${TAG:-} ]]; then
  TAG=$version
  if commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null); then
    TAG=$version-$commit
    [[ -z $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]] || TAG=$TAG-dirty
  fi
fi
[[ $TAG =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || { echo "TAG=$TAG is not a valid image tag" >&2; exit 2; }
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

# --- the images: the top-level Dockerfile with the repository as its context (pip and Maven inside
# the build reach PyPI and Maven Central through the host's network: this engine has no bridge).
# Where the network re-signs TLS, the build trusts the CAs this host added to its store (or the PEM
# file BUILD_CA_CERTS names): the Dockerfile's `cacerts` secret, which no image keeps.
cas=$images/build-cas.pem
if [[ -n ${BUILD_CA_CERTS:-} ]]; then
  cp "$BUILD_CA_CERTS" "$cas"
else
  find /usr/local/share/ca-certificates -name '*.crt' -type f -exec cat {} + >"$cas" 2>/dev/null || : >"$cas"
fi
build() {  # build <target> <tag>
  step "docker build --target $1 -> $2 (from $BASE_IMAGE)"
  timed env DOCKER_BUILDKIT=1 "$DOCKER" build --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --secret "id=cacerts,src=$cas" --target "$1" -t "$2" "$repo"
}
build operator "streamapp/operator:$TAG"
build runtime "streamapp/runtime:$TAG"
# earlier builds' tags go: the engine's data root keeps only what the last build made
"$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}' 'streamapp/*' \
  | grep -vxF -e "streamapp/operator:$TAG" -e "streamapp/runtime:$TAG" | xargs -r "$DOCKER" rmi -f >>"$log" 2>&1 || true

# --- tars for the kind node's containerd, re-saved only when the image id changed.
for tag in "streamapp/operator:$TAG" "streamapp/runtime:$TAG"; do
  name=$(basename "${tag%%:*}")
  id=$("$DOCKER" image inspect -f '{{.Id}}' "$tag")
  if [[ $(cat "$out/$name.id" 2>/dev/null) != "$id $tag" ]]; then  # the tar names its tag too
    step "docker save $tag" >&2
    timed "$DOCKER" save -o "$out/$name.tar.tmp" "$tag"
    mv "$out/$name.tar.tmp" "$out/$name.tar"; echo "$id $tag" >"$out/$name.id"
  fi
  printf '%s\t%s\t%s\n' "$tag" "${id:7:12}" "$(du -h "$out/$name.tar" | cut -f1)"
done >"$out/images.tsv"
echo "$TAG" >"$out/tag"
column -t "$out/images.tsv"
step "images tagged $TAG (helm: --set image.tag=$TAG)"
