# The two commands a new machine needs:
#   make demo   build the launch demo and play a client app's launches inside a private keyring session
#   make test   install what is missing, build, and run every test inside a private keyring session
# And one to check a machine:
#   make doctor build vaultctl and run `vaultctl doctor` inside a private keyring session
SWIFT ?= swift
KEYRING := scripts/with-keyring.sh

.PHONY: all bootstrap build demo doctor test format clean

all: build

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	$(SWIFT) build

# A release build: the demo prints the launch times it measures, and those are the figures that matter.
demo: bootstrap
	$(SWIFT) build -c release --product launch-demo
	$(KEYRING) "$$($(SWIFT) build -c release --show-bin-path)/launch-demo"

doctor: bootstrap
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
