# The environment of every Go build of the test bed, sourced by testbed/build-*.sh and
# testbed/kind/install.sh (CACHE set): modules as each go.mod names them, this machine's Go, static
# binaries, and Go's module and build caches inside ours, so one folder holds every heavy artefact.
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build
# The compiler and the linker collect garbage only when their heap nears GOMEMLIMIT: a fifth less CPU
# for the same builds (DEVELOPMENT.md, "How long"). Not for the long-running Go programs the test bed
# starts (dockerd, kind's node): only the scripts that build export it.
export GOGC=off GOMEMLIMIT=1536MiB
