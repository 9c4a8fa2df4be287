# stoker: `make demo` sets up and runs the main job; `make test` runs every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV     := .venv
PY       := $(VENV)/bin/python
BIN      := bin/stoker
STATIC_BIN ?= bin/stoker-static
TOOLS    := .bin
DATA     ?=
# make bench's images: an ImageFolder of real photos if given, else
# $(BENCH_DATA), generated once by `stoker mkdata`.
PHOTOS   ?=
BENCH_DATA := out/bench-data
THREADS  ?= 1
# make bench's recipe: a preset (docs/transforms.md) that baselines.py runs
# in torchvision too.
TRANSFORM ?= imagenet-train
# make bench's image format: jpeg, or png / webp (copies of the photos made
# with PIL first: bench/compare.py --format).
FORMAT   ?= jpeg
ROUNDS   ?= 3
SECONDS  ?= 8
# make bench: stoker's coefficient cache in bytes (bench pipeline
# --coef-budget), e.g. COEF_BUDGET=2000000000; 0: serve's default (on, a
# quarter of its memory budget); -1: none
COEF_BUDGET ?= 0
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# go.mod asks for Go 1.26; any go >= 1.21 fetches that toolchain through the
# module proxy when GOTOOLCHAIN is auto (some images set local in go.env).
export GOTOOLCHAIN := auto
# A machine with no go >= 1.21 (none, or Debian 12's 1.19) gets this one:
# make apt fetches the toolchain zip that GOTOOLCHAIN=auto would fetch from
# the module proxy (python/fetch_go.py), checked against its SHA-256 here,
# into $(GO_SDK) (golang.org/dl's place), which comes first on make's PATH.
GO_FETCH_VERSION := 1.26.8
GO_FETCH_SHA256_x86_64  := 30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
GO_FETCH_SHA256_aarch64 := 02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
GO_SDK := $(HOME)/sdk/go$(GO_FETCH_VERSION)
export PATH := $(GO_SDK)/bin:$(PATH)

# The Go tools (compile, link, vet, asm, cgo) run through .ci/gctool
# (-toolexec), at GOGC=400: the compiler collects when its heap has grown
# by 400% rather than 100%, and a build from an empty cache takes 11-15%
# fewer CPU-seconds (go build ./...: 147 against 162-170 on a 2-core EPYC)
# for about 8% more memory at the peak. The go command learns each tool's
# ID through the wrapper, so the build cache's keys and the binaries are
# the same. GOFLAGS is exported, so the builds the tests run (make static,
# the pure-Go and arm64 builds, the geometry driver) take it too; the test
# binaries, and the servers they start, keep the GOGC make was started
# with. Left out where it cannot work or would override the user's: a
# path with a space (GOFLAGS splits on spaces), a copy of the tree that
# lost the script's execute bit, a GOFLAGS that has a -toolexec already.
ifeq ($(words $(CURDIR))$(findstring -toolexec,$(GOFLAGS))$(shell test -x .ci/gctool || echo noexec),1)
export GOFLAGS := $(strip $(GOFLAGS) -toolexec=$(CURDIR)/.ci/gctool)
endif

# Every go command make runs compiles as the shipped binaries are compiled
# (make static, make gpuhost, the wheel and the image): -trimpath, and Go's
# own DNS resolver and user lookup (GO_TAGS: netgo, osusergo, no NSS).
# GOFLAGS carries them, so the builds the tests start take them too
# (cmd/stoker's, bench's and deploy's stoker, internal/fmacheck's, the
# Python suite's), and the tests run the configuration that ships. One
# compile of a package then serves them all: -trimpath changes every
# package's compile and netgo every one above net, so beside a plain
# build make static compiled everything again. From an empty go build
# cache, after go vet ./..., make static compiled 9 CPU-s and make gpuhost
# 2, where beside the plain build they compiled 131 and 11; the build
# without cgo 7, not 13. A -tags on a command line replaces GOFLAGS'
# -tags, so the targets that add a tag name GO_TAGS with it. Left out
# where the user's GOFLAGS has a -tags or -trimpath of its own.
GO_TAGS := netgo,osusergo
ifeq ($(findstring -tags,$(GOFLAGS))$(findstring -trimpath,$(GOFLAGS)),)
export GOFLAGS := $(strip $(GOFLAGS) -trimpath -tags=$(GO_TAGS))
endif

# The version make build stamps into bin/stoker: git describe (a tag, or
# the commit when there is none; -dirty with uncommitted changes). Empty
# outside a git checkout: internal/version then says what Go recorded.
STOKER_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
VERSION_LDFLAG := -X github.com/stoker-dev/stoker/internal/version.stamped=$(STOKER_VERSION)

# Pinned code generators.
BUF_VERSION               := v1.57.2
PROTOC_GEN_GO_VERSION     := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1

# Pinned object stores the tests serve buckets from on loopback
# (internal/storetest starts them and checks these very versions).
VERSITYGW_VERSION       := v1.8.0
FAKE_GCS_SERVER_VERSION := v1.56.1
# Azurite (Azure Blob Storage) is an npm package, run on node: 3.35.0 is
# the last that runs on Debian 12's node 18 (3.36 wants node 21).
AZURITE_VERSION         := 3.35.0

# Debian packages the build and the demo need; the tests add strace,
# qemu-user (internal/fmacheck runs arm64 test binaries with qemu-aarch64),
# libgl1 and libglib2.0-0 (opencv-python, which ultralytics, the YOLO
# kernels' reference, imports: its wheel links them)
# and node and npm for Azurite (APT_TEST=1: make setup sets it).
APT_PKGS := gcc libc6-dev make pkg-config libjpeg62-turbo-dev libpng-dev libwebp-dev python3 python3-venv python3-dev git ca-certificates
APT_TEST_PKGS := strace qemu-user libgl1 libglib2.0-0
APT_TEST ?=
# The demo's packages come without their Recommends (g++, manpages, the
# Sphinx docs' JavaScript, ...: a fifth of what apt fetched on a fresh
# Debian 13), which neither the build nor the demo uses; make setup's keep them.
APT_NO_RECOMMENDS = $(if $(APT_TEST),,--no-install-recommends)
# make cross-arm64's: the aarch64 cross compiler and the arm64 builds of the
# libraries the pipeline's C links (Debian multiarch: make apt-arm64 adds
# the arm64 architecture to dpkg first).
APT_ARM64_PKGS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross libjpeg62-turbo-dev:arm64 libpng-dev:arm64 \
	libwebp-dev:arm64 zlib1g-dev:arm64 qemu-user

.PHONY: help setup apt apt-test apt-arm64 cross-arm64 venv venv-run tools stores build lab static wheel gpuhost check test test-go test-go-race test-go-once test-asan test-python lint check-generate generate bench bench-detection bench-peers peers-venv demo clean

# Every target has a `## what it does` comment on its line: make help lists
# them all (python/tests/test_repo.py checks it against .PHONY).
help: ## this list
	@sed -n 's/^\([a-z0-9-]*\):.*## \(.*\)/\1\t\2/p' $(MAKEFILE_LIST) | \
		while IFS=$$'\t' read -r t d; do printf 'make %-15s %s\n' "$$t" "$$d"; done

setup: apt-test tools stores venv ## install system packages, Go tools, the test object stores and the Python venv (.venv)

# System packages, only those missing (apt-get update first, as a fresh
# machine's lists may be empty). Then Go: the installed go's own version is
# checked (GOTOOLCHAIN=local: no download); none >= 1.21, and go$(GO_FETCH_VERSION)
# is fetched into $(GO_SDK) (not Debian's golang-go: Debian 12's is too old,
# and Debian 13's would only fetch the toolchain go.mod asks for after its
# own download); go version then fetches that toolchain if it is still
# missing (a failed download says why).
apt-test: ## install the Debian packages the build and the tests need (only those missing)
	@$(MAKE) --no-print-directory apt APT_TEST=1

apt: ## install the Debian packages the build and the demo need (only those missing), and Go where there is none new enough
	@missing=$$(for p in $(APT_PKGS) $(if $(APT_TEST),$(APT_TEST_PKGS)); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$(APT_TEST)" ] && ! command -v node >/dev/null; then missing="$$missing nodejs"; fi; \
	if [ -n "$(APT_TEST)" ] && ! command -v npm >/dev/null; then missing="$$missing npm"; fi; \
	if [ -n "$$missing" ]; then \
		echo "apt-get install:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_NO_RECOMMENDS) $$missing; \
	fi
	@v=$$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'); \
	if [ -z "$$v" ] || [ "$$v" -lt 21 ]; then \
		echo "no go >= 1.21 to fetch the Go 1.26 toolchain go.mod asks for ($$(command -v go >/dev/null && GOTOOLCHAIN=local go version 2>&1 | head -n 1 || echo no go at all)): fetching go$(GO_FETCH_VERSION) into $(GO_SDK)"; \
		python3 python/fetch_go.py $(GO_FETCH_VERSION) '$(GO_FETCH_SHA256_$(shell uname -m))' '$(GO_SDK)' || exit 1; \
	fi
	go version

apt-arm64: ## install the aarch64 cross compiler and arm64 libjpeg-turbo, libpng, libwebp, zlib (dpkg --add-architecture arm64) for make cross-arm64
	@dpkg --print-foreign-architectures | grep -qx arm64 || { echo "dpkg --add-architecture arm64"; $(SUDO) dpkg --add-architecture arm64; }
	@missing=$$(for p in $(APT_ARM64_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt-get install:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(TOOLS)/.stamp-$(BUF_VERSION)-$(PROTOC_GEN_GO_VERSION)-$(PROTOC_GEN_GO_GRPC_VERSION):
	GOBIN=$(CURDIR)/$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	GOBIN=$(CURDIR)/$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CURDIR)/$(TOOLS) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	touch $@

tools: $(TOOLS)/.stamp-$(BUF_VERSION)-$(PROTOC_GEN_GO_VERSION)-$(PROTOC_GEN_GO_GRPC_VERSION) ## the pinned code generators (buf, protoc-gen-go, protoc-gen-go-grpc) into .bin

# The object-storage tests run real servers: versitygw serves a directory
# as S3, fake-gcs-server one as GCS, Azurite one as Azure Blob Storage.
# The first two are Go programs, so go install builds them from the module
# proxy like the generators above; Azurite comes from the npm registry
# into .bin/azurite (node and npm: the apt step).
$(TOOLS)/.stamp-stores-$(VERSITYGW_VERSION)-$(FAKE_GCS_SERVER_VERSION)-$(AZURITE_VERSION):
	GOBIN=$(CURDIR)/$(TOOLS) go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	GOBIN=$(CURDIR)/$(TOOLS) go install github.com/fsouza/fake-gcs-server@$(FAKE_GCS_SERVER_VERSION)
	npm install --prefix $(CURDIR)/$(TOOLS)/azurite --no-audit --no-fund --no-save --loglevel=error azurite@$(AZURITE_VERSION)
	touch $@

stores: $(TOOLS)/.stamp-stores-$(VERSITYGW_VERSION)-$(FAKE_GCS_SERVER_VERSION)-$(AZURITE_VERSION) ## the pinned object stores the tests serve buckets with (versitygw for S3, fake-gcs-server for GCS, Azurite for Azure) into .bin

# The venv is rebuilt only when the pinned requirements change; torch brings
# its CUDA libraries (a few GB): pip's cache makes a second install quick.
# Two stamps: what the demo runs on (requirements.txt: torch, the client)
# and, on top, what the tests, the generator and the examples need
# (requirements-dev.txt), so that make demo installs only the first.
$(VENV)/.stamp-run: python/requirements.txt python/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r python/requirements.txt
	$(PY) -m pip install -q --no-deps -e ./python
	touch $@

$(VENV)/.stamp: $(VENV)/.stamp-run python/requirements-dev.txt
	$(PY) -m pip install -q -r python/requirements-dev.txt
	touch $@

venv-run: $(VENV)/.stamp-run ## the Python venv (.venv) with what the demo needs: python/requirements.txt and the client (editable)

venv: $(VENV)/.stamp ## the Python venv (.venv) with python/requirements-dev.txt too: pytest, the generator, the examples' frameworks

build: ## bin/stoker, its version stamped from git (git describe; a plain `go build` says devel-<commit>)
	go build -ldflags '$(VERSION_LDFLAG)' -o $(BIN) ./cmd/stoker

# bin/stoker-lab: the same stoker with bench/lab linked (cmd/stoker/lab.go,
# -tags lab): the tests' S3 server, latency proxy and DNS server, which
# `stoker bench store` and `stoker bench backpressure --scenario autoscale`
# stand up. The product binary links none of them (TestArrows).
LAB_BIN ?= bin/stoker-lab
lab: ## bin/stoker-lab: stoker with the benchmarks' test harnesses (bench store, bench backpressure --scenario autoscale), LAB_BIN=path
	go build -tags '$(GO_TAGS),lab' -ldflags '$(VERSION_LDFLAG)' -o $(LAB_BIN) ./cmd/stoker

# The static stoker of the container image (Dockerfile) and of the chroot
# test (cmd/stoker/static_linux_test.go runs this very target): cgo with
# libjpeg62-turbo-dev's libjpeg.a linked in, Go's own DNS resolver and user
# lookup (netgo, osusergo: no NSS), and no NVML (nonvml: go-nvml dlopens the
# driver's libnvidia-ml.so, which a static glibc cannot load safely), so it
# runs in an empty root.
STATIC_TAGS := $(GO_TAGS),nonvml
static: ## a static stoker (libjpeg-turbo linked in, no NVML) for minimal images: bin/stoker-static (STATIC_BIN=path)
	CGO_ENABLED=1 go build -trimpath -tags '$(STATIC_TAGS),jpegstatic' \
		-ldflags '-s -w $(VERSION_LDFLAG) -linkmode external -extldflags "-static"' -o $(STATIC_BIN) ./cmd/stoker

# make wheel: the platform wheel `pip install` gives users, in dist/: the
# client package (python/) with make static's binary at stoker/_bin/stoker
# and the console script `stoker` that runs it. A copy of python/ is staged
# in out/wheel/ (its build/ and egg-info stay there) and built with .venv's
# pinned setuptools, no build isolation (nothing fetched); python/setup.py
# puts the binary in and tags it py3-none-$(WHEEL_PLATFORM).
# The tag is honest because the binary is static: no glibc, no shared
# library (checked here: readelf finds no dynamic section; ldd says "not a
# dynamic executable"), so any Linux of the architecture runs it,
# manylinux2014's and older. WHEEL_ARCH=aarch64 on an x86-64 machine: the
# same static build cross-compiled (make apt-arm64's compiler and arm64
# libraries, as make cross-arm64), into bin/stoker-static-aarch64.
HOST_ARCH := $(shell uname -m)
WHEEL_ARCH ?= $(HOST_ARCH)
WHEEL_PLATFORM = manylinux_2_17_$(WHEEL_ARCH).manylinux2014_$(WHEEL_ARCH)
WHEEL_STAGE ?= out/wheel/$(WHEEL_ARCH)
WHEEL_DIST ?= dist
WHEEL_CROSS = $(filter-out $(HOST_ARCH),$(WHEEL_ARCH))
WHEEL_BIN = $(if $(WHEEL_CROSS),bin/stoker-static-$(WHEEL_ARCH),$(STATIC_BIN))
WHEEL_CROSS_ENV_aarch64 := GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc
wheel: ## the platform wheel (client + static server binary + `stoker` on PATH) into dist/ (WHEEL_DIST=dir; WHEEL_ARCH=aarch64 cross-compiles), with .venv's setuptools
	@case "$(WHEEL_ARCH)" in x86_64|aarch64) ;; *) echo "WHEEL_ARCH=$(WHEEL_ARCH): want x86_64 or aarch64"; exit 1;; esac
	@if [ -n "$(WHEEL_CROSS)" ] && [ "$(WHEEL_ARCH)" != aarch64 -o "$(HOST_ARCH)" != x86_64 ]; then \
		echo "make wheel cross-compiles x86_64 -> aarch64 only (this machine: $(HOST_ARCH))"; exit 1; fi
	$(if $(WHEEL_CROSS),@$(MAKE) --no-print-directory apt-arm64)
	$(WHEEL_CROSS_ENV_$(if $(WHEEL_CROSS),$(WHEEL_ARCH))) $(MAKE) --no-print-directory static STATIC_BIN=$(WHEEL_BIN)
	@LC_ALL=C readelf -d $(WHEEL_BIN) 2>&1 | grep -q 'no dynamic section' || { echo "$(WHEEL_BIN) is not static (readelf -d): no manylinux tag"; exit 1; }
	rm -rf $(WHEEL_STAGE) && mkdir -p $(WHEEL_STAGE) $(WHEEL_DIST)
	cp -r python/pyproject.toml python/setup.py python/README.md python/stoker $(WHEEL_STAGE)/
	find $(WHEEL_STAGE) -name __pycache__ -prune -exec rm -rf {} +
	rm -f $(WHEEL_DIST)/stoker-*-py3-none-$(WHEEL_PLATFORM).whl
	STOKER_WHEEL_PLATFORM=$(WHEEL_PLATFORM) STOKER_WHEEL_BINARY=$(abspath $(WHEEL_BIN)) \
		$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(WHEEL_DIST) $(WHEEL_STAGE)
	@ls $(WHEEL_DIST)/stoker-*-py3-none-$(WHEEL_PLATFORM).whl

# The GPU host's stoker (the coordinator beside the trainer; the Dockerfile's
# gpuhost target, on distroless/cc): libjpeg-turbo linked in as in static,
# but glibc linked dynamically, so that NVML's dlopen of the driver's
# libnvidia-ml.so.1 (mounted by the NVIDIA container toolkit) works and the
# GPU monitor reads the trainer's GPUs. It needs only glibc where it runs
# (cmd/stoker/static_linux_test.go runs this very target too).
GPUHOST_BIN ?= bin/stoker-gpuhost
gpuhost: ## the GPU host's stoker (libjpeg-turbo linked in, glibc dynamic for NVML): bin/stoker-gpuhost (GPUHOST_BIN=path)
	CGO_ENABLED=1 go build -trimpath -tags '$(GO_TAGS),jpegstatic' \
		-ldflags '-s -w $(VERSION_LDFLAG) -linkmode external -extldflags "-Wl,--as-needed"' -o $(GPUHOST_BIN) ./cmd/stoker

generate: tools venv ## regenerate the Go and Python code from proto/stoker/v1/stoker.proto
	$(TOOLS)/buf generate
	$(PY) -m grpc_tools.protoc -Iproto --python_out=python --pyi_out=python --grpc_python_out=python proto/stoker/v1/stoker.proto

# CI fails when the committed generated code is stale (connect-go's checkgenerate).
# No pager: on a terminal git would wait in less for a key.
check-generate: generate ## fail when the committed generated code is stale
	@git --no-pager diff --exit-code -- proto python/stoker/v1 || { echo "generated code is stale: run make generate and commit"; exit 1; }

# The packages whose files (tests' too) are others without cgo: those that
# import "C" or have files built without cgo alone (//go:build !cgo). The
# pure-Go vet reads these; every other package's files are the same with
# and without cgo, vetted by go vet ./... already. That they all compile
# without cgo is test-go-once's pure-Go build's to say (go list compiles
# nothing: this costs no build).
NOCGO_DIFFER = { go list -f '$(NOCGO_FILES)' ./... && CGO_ENABLED=0 go list -f '$(NOCGO_FILES)' ./...; } | sort | uniq -u | cut -d' ' -f1 | sort -u
NOCGO_FILES := {{.ImportPath}} {{.GoFiles}} {{.CgoFiles}} {{.TestGoFiles}} {{.XTestGoFiles}}
lint: tools ## gofmt, go vet (cgo, and pure Go where the files differ), buf lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
	go vet -tags '$(GO_TAGS),lab' ./cmd/stoker/
	CGO_ENABLED=0 go vet $$($(NOCGO_DIFFER))
	cd deploy && go vet ./...
	$(TOOLS)/buf lint

# The tests hold however make test is started (nohup, &, setsid, SIGINT
# ignored, a loaded machine): they read nothing from stdin, which is
# /dev/null here whatever it was (closed, a terminal that a background job
# may not read); children they start set the signal dispositions they rely
# on; and each waits for events under a hang guard. GO_TEST_TIMEOUT bounds
# each package's test binary (go test's default, 10 min, is less than
# cmd/stoker's real processes take on a loaded 2-core machine): it turns a
# hang into a failure, it is no measure of speed.
GO_TEST_TIMEOUT ?= 30m

# The exactness tests: arithmetic on one goroutine (a fast path against
# its reference, bytes against bytes, huge-file checksums), where the race
# detector has nothing to find and costs 10 to 100 times the time. Their
# names say so: TestExact..., each calling exactTest(t) (or the pipeline's
# and pipeline/codec/index's exactSerialTest(t)) first, which skips it
# under -race; test-go-race skips them by name, test-go-once runs them by
# name, once, in EXACT_PKGS. The server's CPU share measurements
# (TestShareCPU..., calling shareTest(t): the race detector slows the Go
# between a trainer's batches, not the attacks' C) likewise, in SHARE_PKGS.
# TestTestNames (cmd/stoker) holds the rule: a test calling exactTest or
# shareTest has the prefix, a test with the prefix calls it, and a
# package with such tests is in EXACT_PKGS or SHARE_PKGS. The pipeline's and
# pipeline/kernels/cv's exactTest run their tests in parallel with the
# others (CPU-bound and independent).
EXACT_PKGS := ./pipeline/ ./pipeline/kernels/ ./pipeline/kernels/cv/ ./pipeline/codec/ ./pipeline/codec/index/ ./pipeline/internal/heappeak/
SHARE_PKGS := ./server/
ONCE_ONLY := ^(TestExact|TestShareCPU)
# internal/fmacheck's tests run compilers and read their listings (a
# million lines of assembly) on one goroutine: they skip under -race
# (notUnderRace) and the package runs once without it.

# The pipeline's pure-Go build (CGO_ENABLED=0: the _nocgo.go files, Go's
# decoders and kernels in place of the C) runs the tests of the pipeline
# package, of pipeline/kernels and of the rooms whose tests run the
# kernels (pipeline/fn, pipeline/transform: a step's kernel, a trace's
# steps applied, the pure-Go build's cost prices) that compile without
# cgo. The pipeline's tests whose code and checks are the same without
# cgo (the executor's scheduling, fields, headers: no decoded pixel
# checked) are in files built with cgo alone (//go:build cgo: queue_test.go,
# queue_class_test.go, stages_test.go, shares_test.go, shipping_test.go,
# fields_test.go, header_test.go), which the -race run has run; their
# helpers are in executor_helpers_test.go. Its other subpackages (dataset,
# source, annot, batch, det, errs, codec/index) have no cgo code: not run
# again.

# The build without cgo: every package, on this machine's architecture
# (most of it compiled already, for cmd/stoker's TestVersion and the
# pure-Go tests), then for arm64 the packages whose files differ there:
# today none of this module's (ARCH_DIFFER lists those too, should one
# get a file of its own on arm64), but x/sys/unix, x/net's ipv4 and ipv6,
# procfs, xxhash, x/crypto's chacha20 and x/sys/cpu, which have. A package
# built from the same files compiles the same on both (64-bit, and stoker's
# code reads no GOARCH but through those files): building all of it for
# arm64 a second time cost 136 CPU-s from an empty go build cache, and
# this 15. internal/fmacheck compiles the pipeline's and internal/'s
# packages for arm64 too, to read their assembly.
# The build without cgo is built as make static builds (-trimpath, its
# tags, -s -w), as cmd/stoker's TestVersion builds its binary without cgo:
# the module's files are the same with those tags (they choose the
# standard library's pure-Go net and os/user, which CGO_ENABLED=0 does
# anyway), and the three then share every package but the ones with C.
# In make test, make static comes first (the Python suite's wheel test):
# from an empty go build cache, TestVersion's build without cgo then
# compiled 8.5 CPU-s and this one 6.9, where the plain build costs 138.
NOCGO_AS_STATIC = -trimpath -tags '$(STATIC_TAGS)' -ldflags '-s -w'
ARCH_FILES := {{if not .Standard}}{{.ImportPath}} {{.GoFiles}} {{.CgoFiles}} {{.SFiles}}{{end}}
ARCH_DIFFER = { CGO_ENABLED=0 go list -deps -f '$(ARCH_FILES)' ./... && CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go list -deps -f '$(ARCH_FILES)' ./...; } | sort | uniq -u | cut -d' ' -f1 | sort -u

# deploy/ is a module of its own (its tests need the Kubernetes modules,
# which the binary's module does not require): ./... does not reach it.
# Its code and tests run on one goroutine (they read and check manifests,
# and run the stoker binary), so the race detector has nothing to find
# there: test-go-once runs them without -race, on the packages lint's
# go vet compiled, rather than compiling the Kubernetes modules a second
# time with -race (54 CPU-s from an empty go build cache).
test-go: test-go-race test-go-once ## Go tests: test-go-race, then test-go-once

# go test runs a part of go vet's checks on each package it tests, after
# compiling its dependencies' vet facts again (the race build's, the pure-Go
# build's: each its own). make test runs lint first, whose go vet ./...
# (every check, the test files too, with cgo and without where files
# differ, and deploy/'s) has checked those very files, so it passes
# GO_TEST_VET=-vet=off to its Go tests; make test-go alone keeps go test's.
GO_TEST_VET ?=

test-go-race: stores ## Go tests (-race) of the module
	go test -race $(GO_TEST_VET) -count=1 -timeout $(GO_TEST_TIMEOUT) -skip '$(ONCE_ONLY)' ./... </dev/null

test-go-once: stores ## the Go tests that run once without -race: the pipeline's exactness tests, the server's CPU shares, internal/fmacheck, the pure-Go pipeline, the build without cgo (arm64's where its files differ)
	go test $(GO_TEST_VET) -count=1 -timeout $(GO_TEST_TIMEOUT) -run '^TestExact' $(EXACT_PKGS) </dev/null
	go test $(GO_TEST_VET) -count=1 -timeout $(GO_TEST_TIMEOUT) -run '^TestShareCPU' $(SHARE_PKGS) </dev/null
	go test $(GO_TEST_VET) -count=1 -timeout $(GO_TEST_TIMEOUT) ./internal/fmacheck/ </dev/null
	CGO_ENABLED=0 go test $(GO_TEST_VET) -count=1 -timeout $(GO_TEST_TIMEOUT) ./pipeline/ ./pipeline/kernels/ ./pipeline/fn/ ./pipeline/transform/ ./pipeline/ops/ ./pipeline/policy/ </dev/null
	CGO_ENABLED=0 go build $(NOCGO_AS_STATIC) ./...
	@p="$$($(ARCH_DIFFER))"; echo "arm64 (pure Go), the packages whose files differ there:" $$p; \
		[ -z "$$p" ] || CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build $$p
	cd deploy && go test $(GO_TEST_VET) -count=1 -timeout $(GO_TEST_TIMEOUT) ./... </dev/null

# The arm64 build with cgo: the pipeline's C cross-compiled with
# aarch64-linux-gnu-gcc and linked against Debian's arm64 libjpeg-turbo,
# libpng and libwebp (make apt-arm64), and the pipeline's golden tests in
# that build, linked statically, under qemu-aarch64
# (TestARM64CgoGoldenUnderQemu). Not part of make test: its apt step
# adds a foreign architecture to the machine's dpkg, which make setup does
# not do to a developer's machine, and it compiles every package once more.
# make test-go builds without cgo (for arm64, the packages whose files
# differ there), and internal/fmacheck reads the arm64 assembly.
ARM64_BIN ?= bin/stoker-linux-arm64
cross-arm64: apt-arm64 ## the arm64 build with cgo (the C cross-compiled, arm64 libjpeg-turbo): go build ./..., bin/stoker-linux-arm64 (ARM64_BIN=path), its golden tests under qemu
	CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc go build ./...
	CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc go build -ldflags '$(VERSION_LDFLAG)' -o $(ARM64_BIN) ./cmd/stoker
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) -run '^TestARM64CgoGoldenUnderQemu$$' -v ./internal/fmacheck/ </dev/null

# The pipeline's C (pipeline/codec's turbo.c, resize.c, passes.c, huff.c,
# phuff.c, coefs.c, transcode.c, pngrows.c, formats.c, which the pipeline
# package's tests drive, pipeline/kernels' kernels.c, kernels_color.c,
# geom.c, which its tests and pipeline/fn's, pipeline/ops', pipeline/policy's
# and pipeline/transform's drive, and pipeline/kernels/cv's cv.c, the YOLO
# family's) under AddressSanitizer (go test -asan: Go's allocations too) and
# UndefinedBehaviorSanitizer (CGO_CFLAGS), in the packages' tests,
# the fuzz targets' seeds among them: any report ends the test binary with
# an error (UBSan: -fno-sanitize-recover). The system's libjpeg-turbo,
# libpng, libwebp and zlib are not instrumented. Slow: not part of make
# test. The pipeline package's binary alone ran 42 min on a shared 2-core
# machine (the kernels' 3.3 min, cv's 13): past GO_TEST_TIMEOUT's 30 min,
# so its own bound, ASAN_TEST_TIMEOUT.
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=undefined -fno-sanitize-recover=undefined
ASAN_TEST_TIMEOUT ?= 120m
test-asan: stores ## the pipeline's tests with its C under AddressSanitizer and UndefinedBehaviorSanitizer (go test -asan)
	CGO_ENABLED=1 CGO_CFLAGS='$(ASAN_CFLAGS)' CGO_LDFLAGS='-fsanitize=undefined' ASAN_OPTIONS=halt_on_error=1 \
		go test -asan -count=1 -timeout $(ASAN_TEST_TIMEOUT) ./pipeline/ ./pipeline/codec/ ./pipeline/kernels/ ./pipeline/kernels/cv/ ./pipeline/fn/ ./pipeline/ops/ ./pipeline/policy/ ./pipeline/transform/ </dev/null

test-python: venv build ## the Python client's tests and examples/, against bin/stoker
	STOKER_BIN=$(CURDIR)/$(BIN) $(PY) -m pytest -q --durations=25 python/tests </dev/null

# make check: the inner loop, minutes not a quarter of an hour: lint, the
# build, and the Go unit tests that start no process, store or compiler:
# go test -short (which skips the object stores' tests) of every package
# but CHECK_SLOW's, the repository's shape from cmd/stoker (its arrows,
# rooms, layout, docs' links and test names: no binary built), without
# -race and without the exactness and CPU share tests (ONCE_ONLY) and
# CHECK_SKIP's, the two slowest of the rest on a 2-core machine (every
# preset's golden hash, 38 s; a victim's CPU share over seconds, 17 s). go
# test's cache keeps a package whose code and files did not change from
# running again. make test runs all of it, and the Python suite.
CHECK_SLOW := cmd/stoker|bench|internal/storetest|internal/fmacheck
CHECK_SKIP := ^(TestGoldenPresets|TestCPUShareVictim)$$
CHECK_SHAPE := ^(TestArrows|TestLayout|TestPipelineRooms|TestReadmeLayout|TestDocsLinks|TestDocsSelfContained|TestMovedSections|TestTestNames)$$
check: lint build ## the inner loop: lint, build, the fast Go unit tests (go test -short: no process, store or compiler started, no -race, no exactness tests, CHECK_SKIP's) and the repository's shape
	go test -short -timeout $(GO_TEST_TIMEOUT) -skip '$(ONCE_ONLY)|$(CHECK_SKIP)' $$(go list ./... | grep -v -E '/($(CHECK_SLOW))$$') </dev/null
	go test -short -timeout $(GO_TEST_TIMEOUT) -run '$(CHECK_SHAPE)' ./cmd/stoker/ </dev/null

# make test runs its three long parts, the Python suite (the longest,
# first: bin/stoker, its prerequisite, is built before and not again, -o
# build, or the build's slot goes to the third part), the Go tests under
# -race, then the Go tests that run once without it: TEST_JOBS of them
# at a time. On a machine of 4 cores or more, two side by side (each
# alone leaves cores idle: the suite waits on its servers, go test -race
# ./... ends on cmd/stoker alone), every test beside another's load. On
# fewer, one after the other: side by side on a 2-core machine they only
# contend, and each test's waits grow, with what it spends waiting
# (measured on one, the same tree and a warm go build cache: 1,762
# CPU-seconds side by side, 1,618 one after the other, 21 minutes
# either way; a change to a package many import costs more than that in
# compiles, whichever way the parts run). TEST_JOBS=2 puts them side by
# side anyway (the tests must hold under load). Output is kept whole line
# by line (--output-sync=line): a hung test's last lines are there when
# its timeout ends it.
TEST_JOBS ?= $(shell [ "$$(nproc)" -ge 4 ] && echo 2 || echo 1)
test: setup lint check-generate build ## every test: lint, generated code, then the Python suite, test-go-race and test-go-once (two at a time on 4 cores or more: TEST_JOBS)
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=line -o build GO_TEST_VET=-vet=off test-python test-go-race test-go-once

bench: setup build ## stoker's pipeline vs torchvision (PIL, v2) on THREADS cores, interleaved rounds (PHOTOS=ImageFolder, else generated; TRANSFORM=recipe; FORMAT=png|webp)
	@if [ -n "$(PHOTOS)" ] && [ ! -d "$(PHOTOS)" ]; then echo "PHOTOS=$(PHOTOS) is not a directory"; exit 1; fi
	@if [ -z "$(PHOTOS)" ] && [ ! -d $(BENCH_DATA) ]; then \
		echo "no PHOTOS given: generating 1200 photo-sized JPEGs in $(BENCH_DATA) (once)"; \
		rm -rf $(BENCH_DATA).tmp && $(BIN) mkdata --out $(BENCH_DATA).tmp --n 1200 --classes 10 && mv $(BENCH_DATA).tmp $(BENCH_DATA); \
	fi
	$(PY) bench/compare.py --stoker $(BIN) --data $(or $(PHOTOS),$(BENCH_DATA)) --threads $(THREADS) --rounds $(ROUNDS) --seconds $(SECONDS) --coef-budget $(COEF_BUDGET) --transform $(TRANSFORM) --format $(FORMAT)

# make bench-detection: stoker's detection presets (DET_TRANSFORMS) against
# torchvision.transforms.v2 running the same pipeline on the same boxes, one
# core each, interleaved rounds (bench/detcompare.py), and yolo against
# ultralytics' own training dataloader (bench/yolocompare.py, which
# detcompare.py runs for it), on a detection set at COCO's sizes and density
# made once by `stoker mkdata --coco --yolo` (DET_N images, the longer side
# 640, 7 instances an image on average, backgrounds from testdata/photos;
# the COCO file and the YOLO layout of the same photos).
DET_N ?= 400
DET_DATA := out/bench-det-640-$(DET_N)
DET_TRANSFORMS ?= detr ssdlite lsj segref ssd yolo
$(DET_DATA):
	rm -rf $@.tmp && $(BIN) mkdata --coco --yolo --out $@.tmp --n $(DET_N) --max-side 640 --instances 7 --backgrounds testdata/photos && mv $@.tmp $@

bench-detection: venv build $(DET_DATA) ## stoker's detr, ssdlite, lsj and segref presets and the references' ssd recipe as it stands vs torchvision.transforms.v2 on boxes, and yolo vs ultralytics' dataloader, per core, interleaved rounds (COCO-sized set made once)
	for t in $(DET_TRANSFORMS); do $(PY) bench/detcompare.py --stoker $(BIN) --data $(DET_DATA) --transform $$t --rounds $(ROUNDS) --seconds $(SECONDS) || exit 1; done

# make bench-peers: stoker against the pipelines a user would pick instead
# (bench/peers.py): torchvision v2 and Pillow from .venv; pillow-simd, NVIDIA
# DALI's CPU pipeline and Meta's SPDL from their own venv, $(PEERS_VENV),
# pinned in python/requirements-peers.txt. That venv sees .venv's torch,
# torchvision and numpy through a .pth file (no second torch), and
# pillow-simd's PIL, in its own site-packages, comes before .venv's Pillow.
# Each peer installs on its own: one that does not (pillow-simd builds from
# source, with AVX2 where the CPU has it) leaves its reason in
# $(PEERS_VENV)/failed/, and bench/peers.py skips it, saying why. SPDL
# decodes with the system's FFmpeg libraries (Debian's ffmpeg brings them).
# PHOTOS: an ImageFolder (LIMIT=N: only N of its images); LARGE=1: large
# photos made from testdata/photos by bench/mklarge.py (LARGE_N of them,
# >= 8 MP, every second one progressive); neither: testdata/photos.
# PEERS_TRANSFORMS: the recipes (all three by default); COEF_BUDGET=-1:
# stoker without its coefficient cache (a dataset larger than the cache).
PEERS_VENV := out/peers-venv
PEERS_PY   := $(PEERS_VENV)/bin/python
PEERS_RECIPES    := imagenet-train,imagenet-eval,tv-resnet50-v2
PEERS_TRANSFORMS ?= $(PEERS_RECIPES)
LIMIT      ?= 0
LARGE      ?=
LARGE_N    ?= 12
LARGE_SEED ?= 0
LARGE_DATA := out/bench-large-$(LARGE_N)-$(LARGE_SEED)
PEERS_DATA  = $(if $(LARGE),$(LARGE_DATA),$(or $(PHOTOS),testdata/photos))
APT_PEERS_PKGS := ffmpeg

$(PEERS_VENV)/.stamp: python/requirements-peers.txt
	@missing=$$(for p in $(APT_PEERS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt-get install:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing || \
			echo "could not install$$missing: bench-peers will skip SPDL"; \
	fi
	rm -rf $(PEERS_VENV) && $(PY) -m venv $(PEERS_VENV)
	$(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > \
		"$$($(PEERS_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/stoker-base.pth"
	mkdir -p $(PEERS_VENV)/failed $(PEERS_VENV)/logs
	@grep -v '^#' python/requirements-peers.txt | grep . | while read -r req; do \
		name=$${req%%=*}; cc=; nocache=; \
		if [ "$$name" = pillow-simd ]; then nocache=--no-cache-dir; grep -qw avx2 /proc/cpuinfo && cc="cc -mavx2"; fi; \
		echo "pip install $$req$${cc:+ (CC=$$cc)}"; \
		if ! env $${cc:+CC="$$cc"} $(PEERS_PY) -m pip install -q $$nocache "$$req" > $(PEERS_VENV)/logs/$$name.log 2>&1; then \
			tail -n 5 $(PEERS_VENV)/logs/$$name.log > $(PEERS_VENV)/failed/$$name.txt; \
			echo "$$req did not install: bench-peers will skip it ($(PEERS_VENV)/logs/$$name.log)"; \
		fi; \
	done
	touch $@

peers-venv: venv-run $(PEERS_VENV)/.stamp ## the peers' venv of make bench-peers (out/peers-venv): pillow-simd, DALI, SPDL, pinned; each that does not install is skipped

$(LARGE_DATA):
	rm -rf $@.tmp && $(PY) bench/mklarge.py $@.tmp --n $(LARGE_N) --seed $(LARGE_SEED) && mv $@.tmp $@

bench-peers: venv-run build peers-venv $(if $(LARGE),$(LARGE_DATA)) ## stoker vs torchvision v2, Pillow, pillow-simd, DALI (CPU), SPDL: one core each, images per CPU-second, into BENCHMARKS.md (PHOTOS=, LIMIT=N, LARGE=1, PEERS_TRANSFORMS=, COEF_BUDGET=)
	@if [ -z "$(LARGE)" ] && [ -n "$(PHOTOS)" ] && [ ! -d "$(PHOTOS)" ]; then echo "PHOTOS=$(PHOTOS) is not a directory"; exit 1; fi
	$(PY) bench/peers.py --stoker $(BIN) --data $(PEERS_DATA) --limit $(LIMIT) --transforms $(PEERS_TRANSFORMS) \
		--rounds $(ROUNDS) --seconds $(SECONDS) --coef-budget $(COEF_BUDGET) --peers-python $(PEERS_PY) --write BENCHMARKS.md \
		--command 'make bench-peers$(if $(LARGE), LARGE=1 LARGE_N=$(LARGE_N) LARGE_SEED=$(LARGE_SEED),$(if $(PHOTOS), PHOTOS=$(PHOTOS)))$(if $(filter-out 0,$(LIMIT)), LIMIT=$(LIMIT))$(if $(filter-out $(PEERS_RECIPES),$(PEERS_TRANSFORMS)), PEERS_TRANSFORMS=$(PEERS_TRANSFORMS))$(if $(filter-out 0,$(COEF_BUDGET)), COEF_BUDGET=$(COEF_BUDGET)) ROUNDS=$(ROUNDS) SECONDS=$(SECONDS)'

# On a fresh machine the venv is mostly waiting on PyPI (torch and its CUDA
# libraries) and the build is all CPU (the Go toolchain compiles the
# standard library and every module from source): the two run side by side
# (BENCHMARKS.md, "The demo on a fresh machine").
demo: apt ## install what the demo needs (not the tests' object stores and tools), build, serve a demo dataset and train on it for 30 s (DATA=ImageFolder)
	@$(MAKE) --no-print-directory -j2 venv-run build
	$(PY) python/demo.py --stoker $(BIN) $(if $(DATA),--data $(DATA))

clean: ## remove bin/
	rm -rf bin
