# The two commands a new machine needs:
#   make demo   build vaultctl and run the main job inside a private keyring session
#   make test   install what is missing, build, and run every test inside a private keyring session
# And the benchmarks (Benchmarks/, their own package; Documentation/Performance.md):
#   make bench        release build, full run (a few minutes); report on stdout and in Benchmarks/results/
#   make bench-quick  the same in quick mode (under a minute after the build); BENCH_QUICK=1 make bench too
SWIFT ?= swift
KEYRING := scripts/with-keyring.sh
BENCH := Benchmarks
BENCH_FLAGS := $(if $(filter-out 0,$(BENCH_QUICK)),--quick,)

.PHONY: all bootstrap build demo test bench bench-quick format clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	$(SWIFT) build

demo: bootstrap
	$(SWIFT) build --product vaultctl
	$(KEYRING) "$$($(SWIFT) build --show-bin-path)/vaultctl" doctor

# Builds everything (tests and helpers included), fails on any compiler warning, then runs the tests in a
# private D-Bus session with an unlocked gnome-keyring (the Secret Service tests need it and fail without it).
# The benchmark package (its own package, debug build) has one test, run first: the harness in quick mode,
# checking that every workload produced figures (not the timings). The library's suites run last.
test: bootstrap
	@scripts/build-checked.sh $(SWIFT) build --build-tests
	@scripts/build-checked.sh $(SWIFT) build --build-tests --package-path $(BENCH)
	$(KEYRING) $(SWIFT) test --skip-build --package-path $(BENCH)
	$(KEYRING) $(SWIFT) test --skip-build

# SQLite and LMDB come from Debian (libsqlite3-dev, liblmdb-dev: scripts/bootstrap.sh installs them, since the
# harness test in `make test` needs them too). The run happens in a private keyring session for the vault rows.
bench: bootstrap
	@scripts/build-checked.sh $(SWIFT) build -c release --package-path $(BENCH)
	@mkdir -p $(BENCH)/results
	$(KEYRING) $(BENCH)/.build/release/prefskv-bench $(BENCH_FLAGS) \
		--json $(BENCH)/results/latest.json --markdown $(BENCH)/results/latest.md

bench-quick:
	@$(MAKE) --no-print-directory bench BENCH_QUICK=1

format:
	$(SWIFT) format --in-place --recursive --configuration .swift-format Package.swift Sources Tests

clean:
	rm -rf .build $(BENCH)/.build
