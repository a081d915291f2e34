# The two commands a new machine needs:
#   make demo   build vaultctl and run the main job inside a private keyring session
#   make test   install what is missing, build, and run every test inside a private keyring session
SWIFT ?= swift
KEYRING := scripts/with-keyring.sh

.PHONY: all bootstrap build demo test format clean

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
test: bootstrap
	@scripts/build-checked.sh $(SWIFT) build --build-tests
	$(KEYRING) $(SWIFT) test --skip-build

format:
	$(SWIFT) format --in-place --recursive --configuration .swift-format Package.swift Sources Tests

clean:
	rm -rf .build
