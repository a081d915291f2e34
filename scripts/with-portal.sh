#!/usr/bin/env bash
# Run a command in a desktop session as a Flatpak app sees it from outside: a private D-Bus session bus on a path
# socket, an unlocked gnome-keyring and xdg-desktop-portal (whose Secret portal gnome-keyring serves), on a
# throwaway HOME. Inside the command, scripts/sandbox.sh runs a program as a Flatpak app of that session.
#
#   scripts/with-portal.sh COMMAND [ARGUMENTS...]
#
# For tests only (Tests/VaultCtlTests/SecretPortalTests.swift). Inside the command, bash functions:
#   SANDBOX [--talk-secrets] APP_ID PROGRAM [ARGUMENTS...]   scripts/sandbox.sh
#   RESTART_PORTAL                   stops xdg-desktop-portal and starts it again
# and these variables:
#   VAULT_TEST_PORTAL=1              the session is up
#   VAULT_TEST_KEYRING_PASSWORD      the login keyring's password (to unlock it again after a test locks it)
#   VAULT_TEST_PORTAL_HOME           the throwaway HOME
# Needs bubblewrap, xdg-dbus-proxy and xdg-desktop-portal (scripts/bootstrap.sh installs them) and unprivileged
# (or root's) namespaces; fails with a clear message where they are blocked.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGUMENTS...]" >&2
    exit 64
fi
portal=/usr/libexec/xdg-desktop-portal
for tool in bwrap xdg-dbus-proxy dbus-daemon gnome-keyring-daemon gdbus "$portal"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "with-portal: $tool is missing (scripts/bootstrap.sh installs bubblewrap, xdg-dbus-proxy and xdg-desktop-portal)" >&2
        exit 69
    fi
done
if ! bwrap --dev-bind / / --unshare-net --unshare-pid true 2>/dev/null; then
    echo "with-portal: bwrap cannot create namespaces here (user namespaces blocked?): a Flatpak sandbox cannot be made" >&2
    exit 69
fi

home=$(mktemp -d "${TMPDIR:-/tmp}/vault-portal.XXXXXX")
# Whether process $1 is gone (or a zombie its parent has not reaped yet).
gone() { ! kill -0 "$1" 2>/dev/null || [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = Z ]; }
stop_session() {
    # Everything this session started carries VAULT_TEST_PORTAL_HOME=$home in its environment (the bus, the keyring
    # and portals it activated, the proxies): stop them all, the document portal's FUSE mount first, so that no
    # daemon keeps the caller's output open and the HOME can be removed.
    fusermount -uz "$XDG_RUNTIME_DIR/doc" 2>/dev/null || umount -l "$XDG_RUNTIME_DIR/doc" 2>/dev/null || true
    local pids=() p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] && continue
        if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "VAULT_TEST_PORTAL_HOME=$home"; then pids+=("$p"); fi
    done
    if [ ${#pids[@]} -gt 0 ]; then
        # A test may have left one stopped (SIGSTOP): SIGTERM reaches it only once it runs again.
        # SIGTERM first (the daemons flush), SIGKILL after 2 s: a caller may have blocked SIGTERM for its whole
        # tree of children.
        kill -CONT "${pids[@]}" 2>/dev/null || true
        kill "${pids[@]}" 2>/dev/null || true
        local end=$((SECONDS + 2))
        for p in "${pids[@]}"; do
            until gone "$p"; do
                if [ "$SECONDS" -ge "$end" ]; then kill -9 "$p" 2>/dev/null || true; fi
                sleep 0.02
            done
        done
    fi
    rm -rf "$home" 2>/dev/null || { sleep 0.5; rm -rf "$home" 2>/dev/null || true; }
}
trap stop_session EXIT

export HOME="$home"
export XDG_DATA_HOME="$home/.local/share" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache"
export XDG_RUNTIME_DIR="$home/.run"
export XDG_CURRENT_DESKTOP=GNOME
mkdir -p "$XDG_DATA_HOME" "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"
mkdir -m 700 -p "$XDG_RUNTIME_DIR"
unset DISPLAY WAYLAND_DISPLAY GNOME_KEYRING_CONTROL SSH_AUTH_SOCK _VAULT_IN_PRIVATE_BUS VAULT_TEST_KEYRING
export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"
export VAULT_TEST_KEYRING_PASSWORD="test-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
export VAULT_TEST_PORTAL_HOME="$home"

# A session bus on a path socket (a sandbox reaches it only through its proxy's socket).
dbus-daemon --session --address="$DBUS_SESSION_BUS_ADDRESS" --fork --nosyslog >/dev/null 2>>"$home/bus.log"

wait_for_name() {
    local end=$((SECONDS + 120))
    while [ "$SECONDS" -lt "$end" ]; do
        gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
            --method org.freedesktop.DBus.NameHasOwner "$1" 2>/dev/null | grep -q true && return 0
        sleep 0.05
    done
    echo "with-portal: nobody took $1 within 120 s" >&2
    return 1
}

# The keyring first: without a login collection every portal request fails.
printf '%s' "$VAULT_TEST_KEYRING_PASSWORD" | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>>"$home/keyring.log"
wait_for_name org.freedesktop.secrets
"$portal" >"$home/portal.log" 2>&1 &
echo $! >"$home/portal.pid"
disown
wait_for_name org.freedesktop.portal.Desktop

start_portal() {
    "$portal" >>"$home/portal.log" 2>&1 &
    echo $! >"$home/portal.pid"
    disown
    wait_for_name org.freedesktop.portal.Desktop
}
RESTART_PORTAL() {
    local pid
    pid=$(cat "$VAULT_TEST_PORTAL_HOME/portal.pid")
    # SIGKILL: a caller may have blocked SIGTERM for its whole tree of children.
    kill -9 "$pid" 2>/dev/null || true
    until gone "$pid"; do sleep 0.02; done
    start_portal
}
SANDBOX() { "$sandbox" "$@"; }
sandbox="$(cd "$(dirname "$0")" && pwd)/sandbox.sh"
export sandbox portal home
export -f start_portal RESTART_PORTAL SANDBOX wait_for_name gone

export VAULT_TEST_PORTAL=1
status=0
"$@" || status=$?
exit "$status"
