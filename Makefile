# streamapp: every set-up step is here, so that a fresh machine needs only `make test` or `make demo`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

STREAMAPP_CACHE ?= $(HOME)/.cache/streamapp
export STREAMAPP_CACHE
VENV := $(STREAMAPP_CACHE)/venv
PYTHON := $(VENV)/bin/python
# The import packages live in the top-level folders under their own names (see README).
export PYTHONPATH := $(CURDIR)/crds:$(CURDIR)/operator:$(CURDIR)/apps:$(CURDIR)/testbed:$(CURDIR)/demo
PYTEST_ARGS ?=
# Every process a run starts inherits this id; `leftovers` finds exactly those still running.
export STREAMAPP_TESTBED_RUN ?= $(shell date +%s%N)

.PHONY: help venv deps local-deps setup test unit integration demo demo-local testbed-up crds images push push-registry-given registry e2e quickstart kind-image kind-install kind-up kind-smoke kind-down

help:
	@echo "make test        install what is missing, start the test bed and the cluster, run every test, stop everything"
	@echo "make demo        the operator's main job on a kind cluster (chart, app, driver killed and restored)"
	@echo "make demo-local  the runtime alone on local Spark: Kafka, Postgres, no Kubernetes"
	@echo "make unit        only the unit tests: needs the Python venv and a JDK (no test bed, no builds)"
	@echo "make testbed-up  start the test bed and keep it running until Ctrl-C"
	@echo "make crds        regenerate crds/streamapp.io_streamapps.yaml from the API models"
	@echo "make images      build the operator and runtime images (Debian's docker.io, started if absent)"
	@echo "make push REGISTRY=host[:port][/path]  tag both images under REGISTRY and push them"
	@echo "make kind-up     a kind cluster built here (no image pulled); make kind-smoke proves it, kind-down deletes it"
	@echo "make e2e         the end-to-end tests on that kind cluster (brought up and down unless kind-up left it up)"
	@echo "make quickstart  the README's quickstart, run as written on a kind cluster of its own"
	@echo "make bench       the benchmarks (bench/README.md); BENCH_ARGS=--quick for a run in minutes"
	@echo "cache: $(STREAMAPP_CACHE)"

# Idempotent: a warm run checks stamps under $(STREAMAPP_CACHE) and returns in seconds.
venv:
	@CACHE=$(STREAMAPP_CACHE) bash testbed/bootstrap.sh venv

deps:
	@CACHE=$(STREAMAPP_CACHE) bash testbed/bootstrap.sh

# What the runtime alone needs (make demo-local): venv, Kafka, Postgres, Spark's Kafka connector.
local-deps:
	@CACHE=$(STREAMAPP_CACHE) bash testbed/bootstrap.sh local

# Every test, in two lanes side by side (a sequential run used the machine's two cores at 61 % of
# one), balanced by the junit times: lane 1 is the suite on its test bed but the operator's tests;
# lane 2 the end-to-end tests on the kind cluster (tests/e2e, brought up and down around them unless
# `make kind-up` left one up), then the README's quickstart on a kind cluster of its own
# (tests/quickstart), then the operator's tests on a test bed of their own (they mostly wait, and
# lane 2's first two parts end minutes before the suite). They share nothing but the run id. Last,
# alone, the tests marked `alone` (they need the machine's firewall to themselves). TEST_LANES=1 runs
# the lanes one after the other. Per-test times: $(STREAMAPP_CACHE)/logs/junit-*.xml.
TEST_LANES ?= 2
# What `make test` needs before its first test. The images' builds (downloads, dpkg, docker) leave
# a core idle that the Go builds of kind's parts and of the registry fill, so they run side by side
# (after the one apt-get both would otherwise start); then the node image, which needs both.
setup: deps
	@$(CLUSTER_ENV); bash testbed/cluster/deps.sh
	@$(MAKE) --no-print-directory -j3 --output-sync=target -o deps images kind-install registry
	@$(MAKE) --no-print-directory kind-image

test: setup
	@status=0; logs=$(STREAMAPP_CACHE)/logs; run=$(STREAMAPP_TESTBED_RUN); \
	  lane1() { local s=0; \
	    $(PYTHON) -m pytest -m "not alone" --ignore=tests/operator --junitxml=$$logs/junit-$$run-suite.xml $(PYTEST_ARGS) || s=$$?; \
	    return $$s; }; \
	  lane2() { local s=0; \
	    STREAMAPP_E2E_CLUSTER=kind $(PYTHON) -m pytest -m e2e tests/e2e --junitxml=$$logs/junit-$$run-e2e.xml $(PYTEST_ARGS) || s=$$?; \
	    STREAMAPP_QUICKSTART=kind $(PYTHON) -m pytest tests/quickstart --junitxml=$$logs/junit-$$run-quickstart.xml $(PYTEST_ARGS) || s=$$?; \
	    $(PYTHON) -m pytest -m "not alone" tests/operator --junitxml=$$logs/junit-$$run-operator.xml $(PYTEST_ARGS) || s=$$?; \
	    return $$s; }; \
	  if [ "$(TEST_LANES)" = 2 ]; then \
	    echo ">> lane 2 (end-to-end, the README quickstart, then the operator's tests) runs alongside; its output: $$logs/lane2-$$run.log, printed after lane 1"; \
	    lane2 >"$$logs/lane2-$$run.log" 2>&1 & lane2_pid=$$!; \
	    lane1 || status=$$?; \
	    wait $$lane2_pid || status=$$?; echo ">> lane 2:"; cat "$$logs/lane2-$$run.log"; \
	  else \
	    lane1 || status=$$?; lane2 || status=$$?; \
	  fi; \
	  $(PYTHON) -m pytest -m alone --junitxml=$$logs/junit-$$run-alone.xml $(PYTEST_ARGS) || status=$$?; \
	  $(PYTHON) -m streamapp_testbed leftovers || { echo "the tests left processes running" >&2; status=1; }; \
	  exit $$status

unit: venv
	$(PYTHON) -m pytest -m unit $(PYTEST_ARGS)

integration: deps registry images  # tests/integration/test_push.py pushes the built images
	$(PYTHON) -m pytest -m integration $(PYTEST_ARGS)

# The README's quickstart, block by block, on a kind cluster of its own (none may be up).
quickstart: deps images kind-image
	@status=0; STREAMAPP_QUICKSTART=kind $(PYTHON) -m pytest tests/quickstart $(PYTEST_ARGS) || status=$$?; \
	  $(PYTHON) -m streamapp_testbed leftovers || { echo "the tests left processes running" >&2; status=1; }; \
	  exit $$status

# The operator on the kind cluster (brought up and down unless `make kind-up` left one up).
demo: deps images kind-image
	$(PYTHON) -m streamapp_demo

demo-local: local-deps
	$(PYTHON) -m streamapp_demo --local

testbed-up: deps
	$(PYTHON) -m streamapp_testbed up --hold

crds: deps
	$(PYTHON) -m streamapp_api.crd > crds/streamapp.io_streamapps.yaml
	cp crds/streamapp.io_streamapps.yaml charts/streamapp-operator/crds/streamapp.io_streamapps.yaml


# --- images (testbed/cluster: the project's Docker engine, base image and image builds) ----------
CLUSTER_ENV := set -a; source testbed/versions.env; set +a; export CACHE=$(STREAMAPP_CACHE)

# The registry `make push` is tested against (tests/integration/test_push.py).
registry: deps
	@$(CLUSTER_ENV); bash testbed/build-registry.sh >$(STREAMAPP_CACHE)/logs/registry-build.log 2>&1 \
	  || { tail -n 30 $(STREAMAPP_CACHE)/logs/registry-build.log; exit 1; }

# BASE_IMAGE=debian:bookworm-slim builds from a public base instead of the local debootstrap.
images: deps
	@$(CLUSTER_ENV); bash testbed/cluster/deps.sh
	@$(CLUSTER_ENV); bash testbed/cluster/docker.sh bash testbed/cluster/images.sh

# `make images REGISTRY=registry.example.com/team push`: REGISTRY/streamapp/operator:VERSION and
# REGISTRY/streamapp/runtime:VERSION, for the chart's image.registry (docs/install.md).
# PUSH_IMAGES=operator (or runtime) pushes one of them.
REGISTRY ?=
push: push-registry-given images
	@$(CLUSTER_ENV); REGISTRY=$(REGISTRY) bash testbed/cluster/docker.sh bash testbed/cluster/push.sh

push-registry-given:  # before the images are built
	@[[ -n "$(REGISTRY)" ]] || { echo "make push needs REGISTRY=host[:port][/path]" >&2; exit 2; }

# The end-to-end tests on the kind cluster of testbed/kind (kind-up's, left up, else one brought up and down).
e2e: kind-image images
	@status=0; STREAMAPP_E2E_CLUSTER=kind $(PYTHON) -m pytest -m e2e tests/e2e $(PYTEST_ARGS) || status=$$?; \
	  $(PYTHON) -m streamapp_testbed leftovers || { echo "the tests left processes running" >&2; status=1; }; \
	  exit $$status

# --- a kind cluster from this machine's own builds (testbed/kind): Debian's archive and the Go module
# proxy only, no container registry. kind-up leaves it running (KUBECONFIG: $(STREAMAPP_CACHE)/kind-streamapp.kubeconfig).
kind-image:
	@$(CLUSTER_ENV); bash testbed/kind/kind.sh image

# kind and the node's own builds (kubelet, kubeadm, crictl...): the first part of kind-image.
kind-install:
	@$(CLUSTER_ENV); bash testbed/kind/install.sh

kind-up:
	@$(CLUSTER_ENV); bash testbed/kind/kind.sh up

kind-smoke:
	@$(CLUSTER_ENV); bash testbed/kind/smoke.sh

kind-down:
	@$(CLUSTER_ENV); bash testbed/kind/kind.sh down

# The benchmarks (bench/): results in bench/results/*.json, the tables in bench/README.md.
# Heavy: dataplane, realtime, controlplane and recovery by default, 44 min 22 s measured (bench/README.md "How long");
# BENCH_ARGS passes options, e.g. BENCH_ARGS="dataplane --rounds 5", BENCH_ARGS="delivery autoscale",
# or BENCH_ARGS="--quick" (minutes; results in bench/results-quick/, not over the project's figures).
BENCH_ARGS ?=
.PHONY: bench
bench: deps kind-image images  # recovery and autoscale run the images of this tree on the kind cluster
	@status=0; STREAMAPP_BENCH_COMMAND='make bench$(if $(BENCH_ARGS), BENCH_ARGS="$(BENCH_ARGS)")' \
	  PYTHONPATH=$(PYTHONPATH):$(CURDIR)/bench \
	  $(PYTHON) -m streamapp_bench $(BENCH_ARGS) || status=$$?; \
	  $(PYTHON) -m streamapp_testbed leftovers || { echo "the bench left processes running" >&2; status=1; }; \
	  exit $$status
