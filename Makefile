# streamapp: every set-up step is here, so that a fresh machine needs only `make test` or `make demo`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

STREAMAPP_CACHE ?= $(HOME)/.cache/streamapp
export STREAMAPP_CACHE
VENV := $(STREAMAPP_CACHE)/venv
PYTHON := $(VENV)/bin/python
# The import packages live in the top-level folders under their own names (see README).
export PYTHONPATH := $(CURDIR)/crds:$(CURDIR)/operator:$(CURDIR)/apps:$(CURDIR)/testbed
PYTEST_ARGS ?=
# Every process a run starts inherits this id; `leftovers` finds exactly those still running.
export STREAMAPP_TESTBED_RUN ?= $(shell date +%s%N)

.PHONY: help deps test unit integration demo testbed-up crds

help:
	@echo "make test        install what is missing, start the test bed, run every test, stop everything"
	@echo "make demo        run the main job on embedded defaults"
	@echo "make unit        only the unit tests (no test bed)"
	@echo "make testbed-up  start the test bed and keep it running until Ctrl-C"
	@echo "make crds        regenerate crds/streamapp.io_streamapps.yaml from the API models"
	@echo "cache: $(STREAMAPP_CACHE)"

# Idempotent: a warm run checks stamps under $(STREAMAPP_CACHE) and returns in seconds.
deps:
	@CACHE=$(STREAMAPP_CACHE) bash testbed/bootstrap.sh

test: deps
	@status=0; $(PYTHON) -m pytest $(PYTEST_ARGS) || status=$$?; \
	  $(PYTHON) -m streamapp_testbed leftovers || { echo "the tests left processes running" >&2; status=1; }; \
	  exit $$status

unit: deps
	$(PYTHON) -m pytest -m unit $(PYTEST_ARGS)

integration: deps
	$(PYTHON) -m pytest -m integration $(PYTEST_ARGS)

demo: deps
	$(PYTHON) -m streamapp_runtime.demo

testbed-up: deps
	$(PYTHON) -m streamapp_testbed up --hold

crds: deps
	$(PYTHON) -m streamapp_api.crd > crds/streamapp.io_streamapps.yaml


# The benchmarks of issue 7 (bench/): results in bench/results/*.json, the table in README.md.
# Heavy (tens of minutes); BENCH_ARGS passes options, e.g. BENCH_ARGS="dataplane --n 1000000".
BENCH_ARGS ?=
.PHONY: bench
bench: deps
	@status=0; STREAMAPP_BENCH_COMMAND="make bench $(BENCH_ARGS)" PYTHONPATH=$(PYTHONPATH):$(CURDIR)/bench \
	  $(PYTHON) -m streamapp_bench $(BENCH_ARGS) || status=$$?; \
	  $(PYTHON) -m streamapp_testbed leftovers || { echo "the bench left processes running" >&2; status=1; }; \
	  exit $$status
