#!/usr/bin/env bash
# `make push REGISTRY=...` (run through docker.sh, after make images): tags the operator and runtime
# images the last `make images` built as $REGISTRY/streamapp/<name>:<tag> and pushes them
# (PUSH_IMAGES: which of the two, default both). The chart's image.registry takes the same REGISTRY,
# image.tag the same tag. Docker pushes to 127.0.0.0/8 over plain HTTP; any other
# registry must speak TLS or be listed in the engine's insecure-registries.
set -euo pipefail
REGISTRY=${REGISTRY:?REGISTRY=host[:port][/path]}; DOCKER=${DOCKER:?run through docker.sh}
REGISTRY=${REGISTRY%/}
CACHE=${CACHE:?}
tag=$(cat "$CACHE/images/out/tag" 2>/dev/null) || { echo "no images built: run make images" >&2; exit 1; }  # images.sh's
for name in ${PUSH_IMAGES:-operator runtime}; do
  [[ $name == operator || $name == runtime ]] || { echo "PUSH_IMAGES: operator and/or runtime, not $name" >&2; exit 2; }
  local_tag=streamapp/$name:$tag
  remote=$REGISTRY/streamapp/$name:$tag
  "$DOCKER" image inspect "$local_tag" >/dev/null 2>&1 || { echo "$local_tag is not built: run make images" >&2; exit 1; }
  "$DOCKER" tag "$local_tag" "$remote"
  echo ">> docker push $remote"
  t0=$SECONDS
  "$DOCKER" push -q "$remote" >/dev/null
  digest=$("$DOCKER" image inspect -f '{{join .RepoDigests "\n"}}' "$remote" | grep -F "$REGISTRY/streamapp/$name@" | head -n1)
  echo ">>   done in $((SECONDS - t0))s: ${digest:-$remote}"
done
