#!/usr/bin/env bash
# Run a command inside a private D-Bus session bus with an unlocked gnome-keyring on a throwaway HOME.
#
#   scripts/with-keyring.sh swift test
#   scripts/with-keyring.sh --no-secret-service CMD   a private bus with no Secret Service and nothing to
#                                                      activate (what a headless server without a keyring has)
#   scripts/with-keyring.sh --no-keyring CMD          a private bus whose gnome-keyring is only D-Bus activated,
#                                                      so no login keyring and no default collection exist
#
# For tests, CI and the demo only: on a desktop where the user has a real keyring, the library talks to
# that one. The session, its HOME and the daemon are gone when the command exits.
#
# Inside the command these are set:
#   VAULT_TEST_KEYRING=1            tests that need the Secret Service check it and fail without it
#   VAULT_TEST_KEYRING_PASSWORD     the login keyring's password (to unlock again after a test locks it)
#   VAULT_TEST_KEYRING_HOME         the throwaway HOME (its keyrings live in .local/share/keyrings)
set -euo pipefail
# shellcheck source=bare-bus.conf.sh
. "$(dirname "$0")/bare-bus.conf.sh"

mode=keyring
case "${1:-}" in
    --no-secret-service) mode=bare; shift ;;
    --no-keyring) mode=activated; shift ;;
esac
if [ $# -eq 0 ]; then
    echo "usage: $0 [--no-secret-service | --no-keyring] COMMAND [ARGUMENTS...]" >&2
    exit 64
fi

if [ -z "${_VAULT_IN_PRIVATE_BUS:-}" ]; then
    export _VAULT_IN_PRIVATE_BUS=$mode
    home=$(mktemp -d "${TMPDIR:-/tmp}/vault-keyring.XXXXXX")
    trap 'rm -rf "$home"' EXIT
    # The bus's environment is what an activated daemon inherits: set it before the bus starts.
    export HOME="$home"
    export XDG_DATA_HOME="$home/.local/share"
    export XDG_CONFIG_HOME="$home/.config"
    export XDG_RUNTIME_DIR="$home/.run"
    mkdir -p "$XDG_DATA_HOME" "$XDG_CONFIG_HOME"
    mkdir -m 700 -p "$XDG_RUNTIME_DIR"
    # No display: a prompt then fails at once instead of waiting for a click that never comes.
    unset DISPLAY WAYLAND_DISPLAY GNOME_KEYRING_CONTROL SSH_AUTH_SOCK DBUS_SESSION_BUS_ADDRESS
    export VAULT_TEST_KEYRING_PASSWORD="${VAULT_TEST_KEYRING_PASSWORD:-test-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}"
    export VAULT_TEST_KEYRING_HOME="$home"
    # dbus-daemon warns about its fd limit when not privileged; that line is noise.
    bus_options=()
    if [ "$mode" = bare ]; then
        # A session bus configuration without <servicedir>: nothing can be activated on it.
        write_bare_bus_config "$home/bus.conf" "$home"
        bus_options=(--config-file="$home/bus.conf")
    fi
    # Services the bus activates (a gnome-keyring started on demand) inherit the bus daemon's stdout and print
    # GNOME_KEYRING_CONTROL=... there, in the middle of the command's output: send the daemon's stdout to stderr.
    # (dbus-run-session reads the bus address from another descriptor, not stdout.)
    printf '#!/bin/sh\nexec dbus-daemon "$@" 1>&2\n' >"$home/dbus-daemon"
    chmod +x "$home/dbus-daemon"
    bus_options+=(--dbus-daemon="$home/dbus-daemon")
    status=0
    dbus-run-session "${bus_options[@]}" -- "$0" "$@" 2> >(grep --line-buffered -v 'Failed to set fd limit' >&2) \
        || status=$?
    exit "$status"
fi

if [ "$_VAULT_IN_PRIVATE_BUS" != keyring ]; then
    exec "$@"
fi

printf '%s' "$VAULT_TEST_KEYRING_PASSWORD" | gnome-keyring-daemon --unlock --components=secrets >/dev/null

# The daemon returns before it owns its bus name; a client that is quicker would activate a second one.
# Waits for that event; 120 s only guards against a hang (a loaded machine can take seconds to start the daemon).
owned=0
end=$((SECONDS + 120))
while [ "$SECONDS" -lt "$end" ]; do
    if gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
        --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets 2>/dev/null | grep -q true; then
        owned=1
        break
    fi
    sleep 0.05
done
if [ "$owned" -ne 1 ]; then
    echo "with-keyring: gnome-keyring-daemon did not take org.freedesktop.secrets within 120 s" >&2
    exit 1
fi

export VAULT_TEST_KEYRING=1
exec "$@"
