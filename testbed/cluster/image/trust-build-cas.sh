#!/bin/sh
# Trusts, inside a build stage, the extra CA certificates the build was given as the secret `cacerts`
# (`docker build --secret id=cacerts,src=FILE`: PEM, one or more): what a network that re-signs TLS
# (an inspecting proxy) needs for pip and Maven to reach PyPI and Maven Central. They go into the
# stage's system store, and so into Java's (ca-certificates-java's hook); only the venv and the jars
# leave these stages, never the certificates. Without the secret: nothing to do.
set -eu
[ -s /run/secrets/cacerts ] || exit 0
awk '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > ("/usr/local/share/ca-certificates/build-" n ".crt") }' \
  /run/secrets/cacerts
update-ca-certificates >/dev/null 2>&1
