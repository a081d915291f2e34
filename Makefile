# The two commands a new machine needs:
#   make demo   build the launch demo and play a client app's launches inside a private keyring session
#   make test   install what is missing, build, and run every test inside a private keyring session
#               (the torture suites included, in their short mode: about 45 s of the run)
# And one to check a machine:
#   make doctor   build vaultctl and run `vaultctl doctor` inside a private keyring session
# And for reliability work (Documentation/Reliability.md):
#   make torture  the torture suites in their long mode (TORTURE_SECONDS per suite, TORTURE_KILLS, ...), again
#                 with persisted index tables every TORTURE_INDEX_TAIL records, then the multi-threaded and
#                 multi-process tests under ThreadSanitizer; writes torture-report.txt
#   make fuzz     the libFuzzer targets under AddressSanitizer for FUZZ_SECONDS each (default 120)
#   make flake-loop  FLAKE_RUNS (default 20) fresh clones of HEAD through `make test`, one after the other, with
#                 both cores kept busy beside them; writes /tmp/flake-loop/summary.txt (scripts/flake-loop.sh)
# And to install vaultctl (release build) with its man page and shell completions:
#   make release && make install PREFIX=$HOME/.local   (or `sudo make install PREFIX=/usr/local` after the
#                     release build, made as yourself): bin/vaultctl, share/man/man1/vaultctl.1 (generated from
#                     the command definitions by swift-argument-parser's generate-manual), bash, zsh and fish
#                     completions; DESTDIR for staging; CONFIG=debug to install the debug build
#   make man          the man page alone, in .build/man/vaultctl.1 (man -l .build/man/vaultctl.1)
# And the API documentation (DocC, from the toolchain's docc; no package dependency):
#   make api-check BASE=<commit>   what the public API of PrefsKV and SecureVault breaks since BASE
#                     (swift package diagnose-api-breaking-changes); CHANGELOG.md records each break
#   make docs         .build/docs/PrefsKV.doccarchive and SecureVault.doccarchive, from the catalogs in
#                     Sources/*/<module>.docc and the modules' symbol graphs; fails on any DocC warning
# And the benchmarks (Benchmarks/, their own package; Documentation/Performance.md):
#   make bench        release build, full run (about 6 minutes): the side-by-side report, then the scaling curves
#                     (10 to 1,000,000 keys, 8 B to 1 MiB values) drawn into Documentation/curves-*.png; reports
#                     on stdout and in Benchmarks/results/
#   make bench-quick  the same in quick mode (under a minute after the build; plots go to Benchmarks/results/);
#                     BENCH_QUICK=1 make bench too
#   make bench-curves the scaling curves alone
#   make bench-check  instruction counts of the hot paths under callgrind; fails when one grew by more than 5%
#                     over Benchmarks/instructions.txt (make test runs it as a warning);
#                     make bench-check-update rewrites that file (scripts/bench-check.sh)
#   make audit-first-open  a fresh process's first open under callgrind: its instruction count, and a failure if
#                     it builds Swift type metadata at run time (scripts/audit-first-open.sh)
# And the constant-time check (Documentation/SecureVault.md, "Constant time"):
#   make ct-check     the vault's seal and open under valgrind's memcheck with the keys and plaintexts marked secret;
#                     fails on any branch or memory address that depends on them (scripts/ct-check.sh, about 30 s)
SWIFT ?= swift
KEYRING := scripts/with-keyring.sh
BENCH := Benchmarks
CLIENT := Examples/ClientApp
BENCH_FLAGS := $(if $(filter-out 0,$(BENCH_QUICK)),--quick,)

.PHONY: all bootstrap build demo doctor test torture flake-loop fuzz fuzz-corpus bench bench-quick bench-curves bench-check \
	bench-check-update bench-curves-run audit-first-open ct-check format clean install release man docs api-check

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	$(SWIFT) build

# A release build: the demo prints the launch times it measures, and those are the figures that matter.
demo: bootstrap
	$(SWIFT) build -c release --static-swift-stdlib --product launch-demo
	$(KEYRING) "$$($(SWIFT) build -c release --static-swift-stdlib --show-bin-path)/launch-demo"

doctor: bootstrap
	$(SWIFT) build --product vaultctl
	$(KEYRING) "$$($(SWIFT) build --show-bin-path)/vaultctl" doctor

# Builds everything (tests and helpers included), fails on any compiler warning, then runs the tests in a
# private D-Bus session with an unlocked gnome-keyring (the Secret Service tests need it and fail without it).
# The provider matrix (ProviderMatrixTests) also starts sessions of its own with KeePassXC headless
# (scripts/with-keepassxc.sh; bootstrap installs keepassxc).
# The benchmark package (its own package, debug build) has one test, run first: the harness in quick mode,
# checking that every workload produced figures (not the timings). Before it, Examples/ClientApp (its own
# package, depending on this one by path, as an app does) is built and run: the README's snippets, verbatim; its
# own tests (an app's tests on temporary stores and vaults) run outside any D-Bus session; Examples/HeadlessService
# (SecureVault without its SecretService trait) is built, checked to load no libsecret or GLib, and run beside a
# keyring, and vaultctl is built without the trait into .build-headless and checked (scripts/check-headless.sh);
# then an install is checked (scripts/check-install.sh) and the DocC archives built (scripts/build-docs.sh,
# failing on any DocC warning). The hot paths' instruction counts are compared with the committed ones (a warning
# only: scripts/bench-check.sh --warn), and the vault's seal and open are checked for branches on secret data
# (scripts/ct-check.sh: a failure). The library's suites run last.
test: bootstrap
	@scripts/build-checked.sh $(SWIFT) build --build-tests
	@scripts/build-checked.sh $(SWIFT) build --build-tests --package-path $(BENCH)
	@scripts/build-checked.sh $(SWIFT) build --build-tests --package-path $(CLIENT)
	$(KEYRING) $(CLIENT)/.build/debug/ClientApp
	env -u DBUS_SESSION_BUS_ADDRESS $(SWIFT) test --skip-build --package-path $(CLIENT)
	@SWIFT=$(SWIFT) scripts/check-headless.sh
	@scripts/check-install.sh
	@scripts/build-docs.sh
	$(KEYRING) $(SWIFT) test --skip-build --package-path $(BENCH)
	@scripts/bench-check.sh --warn
	@SWIFT=$(SWIFT) scripts/ct-check.sh
	$(KEYRING) $(SWIFT) test --skip-build

TORTURE_SECONDS ?= 900
TORTURE_KILLS ?= 3000
TORTURE_DAMAGES ?= 10000
TORTURE_POWER_OPS ?= 1500
VAULT_CRASH_ROUNDS ?= 2000
TORTURE_AGREEMENT_ROUNDS ?= 2000
TORTURE_FILTER := CrashTortureTests|CorruptionTortureTests|PowerLossTests|ImageReuseTests|ImageBoundRecordsTests|FileSystemFaultTests|CrashTests|MultiProcessTests|EnvironmentErrorTests|CompactionTests|VaultCrashTests|VaultKeyringTests|VaultTamperTests|ChangedUnderneathTests|DamageAgreementTests|ConcurrentWriterTests|PlaintextCacheTests
# The suites run a second time with persisted index tables written every few records (PREFSKV_INDEX_TAIL), so that
# kills, power cuts and damage land in and around them too (the first pass keeps the thresholds of the library).
TORTURE_INDEX_FILTER := CrashTortureTests|CorruptionTortureTests|PowerLossTests|ImageReuseTests|CrashTests|MultiProcessTests|VaultCrashTests|PersistedIndexTests|DamageAgreementTests|ConcurrentWriterTests|PlaintextCacheTests
TORTURE_INDEX_TAIL ?= 8
TSAN_FILTER := threadsWritingAndReadingOneHandleLoseNoUpdate|manySecretsAtOnceFromManyThreadsKeepTheirOwnBytes|aReaderWaitsForASynchronousWriteInFlight|AtomicUpdateTests|anotherHandlesChangeIsHeard|ImageReuseTests|twoHandlesInOneProcessSeeEachOthersWrites|MultiProcessTests|observersHearEveryChange|VaultConcurrencyTests|VaultStaleHandleTests|FileSystemFaultTests|threadsReadingThroughTheCache

torture: bootstrap
	@scripts/build-checked.sh $(SWIFT) build --build-tests
	rm -f torture-report.txt torture-failed.txt
	PREFSKV_TORTURE=long TORTURE_SECONDS=$(TORTURE_SECONDS) TORTURE_KILLS=$(TORTURE_KILLS) \
		TORTURE_DAMAGES=$(TORTURE_DAMAGES) TORTURE_POWER_OPS=$(TORTURE_POWER_OPS) TORTURE_REPORT=$(CURDIR)/torture-report.txt \
		VAULT_CRASH_ROUNDS=$(VAULT_CRASH_ROUNDS) TORTURE_AGREEMENT_ROUNDS=$(TORTURE_AGREEMENT_ROUNDS) \
		$(KEYRING) $(SWIFT) test --skip-build --filter '$(TORTURE_FILTER)' || echo "first pass" >>torture-failed.txt
	PREFSKV_TORTURE=long PREFSKV_INDEX_TAIL=$(TORTURE_INDEX_TAIL) TORTURE_SECONDS=$(TORTURE_SECONDS) \
		TORTURE_KILLS=$(TORTURE_KILLS) TORTURE_DAMAGES=$(TORTURE_DAMAGES) TORTURE_POWER_OPS=$(TORTURE_POWER_OPS) \
		TORTURE_REPORT=$(CURDIR)/torture-report.txt VAULT_CRASH_ROUNDS=$(VAULT_CRASH_ROUNDS) \
		TORTURE_AGREEMENT_ROUNDS=$(TORTURE_AGREEMENT_ROUNDS) $(KEYRING) $(SWIFT) test --skip-build \
		--filter '$(TORTURE_INDEX_FILTER)' || echo "second pass (PREFSKV_INDEX_TAIL)" >>torture-failed.txt
	PREFSKV_TORTURE=long $(SWIFT) test --sanitize=thread --scratch-path .build-tsan --filter '$(TSAN_FILTER)' \
		|| echo "ThreadSanitizer" >>torture-failed.txt
	@echo; cat torture-report.txt
	@# Every pass runs, whichever failed; the target fails after the last when any did, and names them.
	@if [ -e torture-failed.txt ]; then echo "make torture: failed: $$(paste -sd, torture-failed.txt)"; \
		rm -f torture-failed.txt; exit 1; fi

FLAKE_RUNS ?= 20
flake-loop:
	@scripts/flake-loop.sh $(FLAKE_RUNS)

FUZZ_SECONDS ?= 120
# `-Xswiftc -sanitize=fuzzer` instruments every module for coverage: `--sanitize=fuzzer` alone instruments only the
# fuzz target itself, and libFuzzer then mutates blindly ("no interesting inputs").
FUZZ_BUILD := $(SWIFT) build --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer --scratch-path .build-fuzz

# Fuzzing works on copies of the committed seeds (.build-fuzz/corpus), so Fuzz/Corpus stays small; a finding is
# written to crash-* in this directory. SWIFT_BACKTRACE=enable=no: the Swift backtracer would hide the report.
fuzz: bootstrap
	$(FUZZ_BUILD) --product FuzzRecordDecoder
	$(FUZZ_BUILD) --product FuzzOpen
	$(FUZZ_BUILD) --product FuzzVaultOpen
	mkdir -p .build-fuzz/corpus/record-decoder .build-fuzz/corpus/open .build-fuzz/corpus/vault-open
	SWIFT_BACKTRACE=enable=no "$$($(FUZZ_BUILD) --show-bin-path)/FuzzRecordDecoder" -max_total_time=$(FUZZ_SECONDS) \
		-print_final_stats=1 .build-fuzz/corpus/record-decoder Fuzz/Corpus/record-decoder
	SWIFT_BACKTRACE=enable=no "$$($(FUZZ_BUILD) --show-bin-path)/FuzzOpen" -max_total_time=$(FUZZ_SECONDS) \
		-print_final_stats=1 .build-fuzz/corpus/open Fuzz/Corpus/open
	SWIFT_BACKTRACE=enable=no "$$($(FUZZ_BUILD) --show-bin-path)/FuzzVaultOpen" -max_total_time=$(FUZZ_SECONDS) \
		-print_final_stats=1 .build-fuzz/corpus/vault-open Fuzz/Corpus/vault-open

# Rewrites the committed seed corpus from real stores (Tests/PrefsKVTests/FuzzCorpusTests.swift).
fuzz-corpus:
	$(SWIFT) build --build-tests
	PREFSKV_FUZZ_CORPUS=$(CURDIR)/Fuzz/Corpus $(SWIFT) test --skip-build --filter writeTheSeedCorpus
	VAULT_FUZZ_CORPUS=$(CURDIR)/Fuzz/Corpus $(SWIFT) test --skip-build --filter writeTheVaultSeedCorpus

# SQLite and LMDB come from Debian (libsqlite3-dev, liblmdb-dev: scripts/bootstrap.sh installs them, since the
# harness test in `make test` needs them too). The run happens in a private keyring session for the vault rows.
# The token read is also built as the README advises an app to be, the Swift runtime linked in, for its own rows.
bench: bootstrap
	@scripts/build-checked.sh $(SWIFT) build -c release --package-path $(BENCH)
	@scripts/build-checked.sh $(SWIFT) build -c release --static-swift-stdlib --package-path $(BENCH) \
		--scratch-path $(BENCH)/.build-static --product vault-token-read
	@mkdir -p $(BENCH)/results
	BENCH_STATIC_TOKEN_READ=$(CURDIR)/$(BENCH)/.build-static/release/vault-token-read \
		$(KEYRING) $(BENCH)/.build/release/prefskv-bench $(BENCH_FLAGS) \
		--json $(BENCH)/results/latest.json --markdown $(BENCH)/results/latest.md
	@$(MAKE) --no-print-directory bench-curves-run

# The curves of a full run are committed (Documentation/curves-keys.png, curves-values.png); quick ones are not.
bench-curves: bootstrap
	@scripts/build-checked.sh $(SWIFT) build -c release --package-path $(BENCH)
	@mkdir -p $(BENCH)/results
	@$(MAKE) --no-print-directory bench-curves-run

bench-curves-run:
	$(BENCH)/.build/release/prefskv-bench curves $(BENCH_FLAGS) \
		--json $(BENCH)/results/curves.json --markdown $(BENCH)/results/curves.md
	scripts/plot-curves.sh $(BENCH)/results/curves.json $(if $(BENCH_FLAGS),$(BENCH)/results,Documentation)

bench-check: bootstrap
	@scripts/bench-check.sh

bench-check-update: bootstrap
	@scripts/bench-check.sh --update

bench-quick:
	@$(MAKE) --no-print-directory bench BENCH_QUICK=1

audit-first-open: bootstrap
	@scripts/audit-first-open.sh

ct-check: bootstrap
	@SWIFT=$(SWIFT) scripts/ct-check.sh

format:
	$(SWIFT) format --in-place --recursive --configuration .swift-format Package.swift Sources Tests

PREFIX ?= /usr/local
CONFIG ?= release

# vaultctl and the man page generator, built as yourself (before a `sudo make install`).
# A release build links the Swift runtime and Foundation in (--static-swift-stdlib): an installed vaultctl needs no
# Swift toolchain on the machine, and starts with about 30% fewer instructions (PerformanceIssues36-39.md, issue 39). A debug
# build (scripts/check-install.sh's) keeps them shared, as its tests' build does.
STATIC_STDLIB = $(if $(filter release,$(CONFIG)),--static-swift-stdlib)
release: bootstrap
	@scripts/build-checked.sh $(SWIFT) build -c $(CONFIG) $(STATIC_STDLIB) --product vaultctl
	@$(SWIFT) build -c $(CONFIG) $(STATIC_STDLIB) --product generate-manual

# vaultctl, its man page and completions under $(DESTDIR)$(PREFIX), from what `make release` built (built first
# when missing; never as root by `sudo make install`, whose root may have no swift on its PATH).
install:
	@bin=.build/$(CONFIG); \
	if [ ! -x "$$bin/vaultctl" ] || [ ! -x "$$bin/generate-manual" ]; then \
		if [ "$$(id -u)" = 0 ] && [ -n "$${SUDO_USER:-}" ]; then \
			echo "make install: run \`make release\` as yourself first" >&2; exit 1; fi; \
		$(MAKE) --no-print-directory release CONFIG=$(CONFIG); fi; \
	root="$(DESTDIR)$(PREFIX)"; set -e; \
	install -d "$$root/bin" "$$root/share/man/man1" "$$root/share/bash-completion/completions" \
		"$$root/share/zsh/site-functions" "$$root/share/fish/vendor_completions.d"; \
	install -m 0755 "$$bin/vaultctl" "$$root/bin/vaultctl"; \
	"$$bin/generate-manual" "$$bin/vaultctl" --date "$$(git log -1 --format=%cs 2>/dev/null || date +%F)" \
		--output-directory "$$root/share/man/man1"; \
	scripts/man-sections.sh "$$root/share/man/man1/vaultctl.1"; \
	"$$bin/vaultctl" --generate-completion-script bash > "$$root/share/bash-completion/completions/vaultctl"; \
	"$$bin/vaultctl" --generate-completion-script zsh > "$$root/share/zsh/site-functions/_vaultctl"; \
	"$$bin/vaultctl" --generate-completion-script fish > "$$root/share/fish/vendor_completions.d/vaultctl.fish"; \
	echo "installed vaultctl, its man page and completions under $$root"

man:
	@scripts/build-checked.sh $(SWIFT) build --product vaultctl
	@$(SWIFT) build --product generate-manual
	@mkdir -p .build/man
	"$$($(SWIFT) build --show-bin-path)/generate-manual" "$$($(SWIFT) build --show-bin-path)/vaultctl" \
		--output-directory .build/man
	@scripts/man-sections.sh .build/man/vaultctl.1
	@echo "man -l .build/man/vaultctl.1"

docs: bootstrap
	@scripts/build-docs.sh

api-check: bootstrap
	@test -n "$(BASE)" || { echo "make api-check BASE=<commit or tag>" >&2; exit 64; }
	$(SWIFT) package diagnose-api-breaking-changes "$(BASE)" --products PrefsKV SecureVault

clean:
	rm -rf .build .build-fuzz .build-tsan .build-docs $(BENCH)/.build $(BENCH)/.build-prof $(CLIENT)/.build
