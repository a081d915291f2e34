#!/usr/bin/env bash
# Run a program as the Flatpak app APP_ID of the session scripts/with-portal.sh started, as flatpak runs one:
# in a bwrap sandbox built from an empty root (each entry of / bound back, /.flatpak-info with
# `[Application] name=APP_ID`, its own network namespace, a private $XDG_RUNTIME_DIR), reaching the session bus
# only through an xdg-dbus-proxy that runs in a sandbox with the same /.flatpak-info and flatpak's default filter
# (the portals only), so that the Secret Service is not visible from inside.
#
#   scripts/sandbox.sh [--talk-secrets] APP_ID PROGRAM [ARGUMENTS...]
#
# --talk-secrets adds what a manifest's --talk-name=org.freedesktop.secrets adds. The program's exit status is
# the script's.
set -euo pipefail
talk=()
if [ "${1:-}" = --talk-secrets ]; then
    talk=(--talk=org.freedesktop.secrets)
    shift
fi
if [ $# -lt 2 ] || [ -z "${VAULT_TEST_PORTAL:-}" ]; then
    echo "usage (inside scripts/with-portal.sh): $0 [--talk-secrets] APP_ID PROGRAM [ARGUMENTS...]" >&2
    exit 64
fi
app_id=$1
shift

dir=$(mktemp -d "$HOME/.sandbox.XXXXXX")
proxy_pid=
cleanup() {
    # Closing the ready pipe stops the proxy (--fd); SIGKILL, not SIGTERM, ends its bwrap: bwrap blocks SIGTERM, and
    # a caller may have blocked it for its whole tree of children.
    exec 4<&- 2>/dev/null || true
    if [ -n "$proxy_pid" ]; then kill -9 "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
printf '[Application]\nname=%s\n' "$app_id" >"$dir/flatpak-info"

# An empty root with every entry of the host's / bound back (as flatpak builds its own from a runtime).
root=(--tmpfs /)
for entry in /*; do
    case "$entry" in
        /proc | /dev) ;;
        *) if [ -L "$entry" ]; then root+=(--symlink "$(readlink "$entry")" "$entry"); else root+=(--bind "$entry" "$entry"); fi ;;
    esac
done
root+=(--proc /proc --dev-bind /dev /dev --ro-bind "$dir/flatpak-info" /.flatpak-info)

# The proxy: the portal names the app from /proc/PID/root/.flatpak-info of the bus peer, which is the proxy. As
# flatpak does, it is given a pipe: it writes a byte once it listens, and stops when the other end is closed.
mkdir "$dir/bus"
mkfifo "$dir/ready"
# This end is opened first, read-write, and kept until this script ends (and with it the proxy): then no open of the
# pipe blocks. Opened after the fork, a SIGKILL of this script in between left the forked shell blocked for ever in
# its open of the pipe for writing (no reader would come), under the writer's command line: VaultCrashTests(portal)
# waited its 120 s for that "writer" to end in every later round. The proxy's side closes this end (4<&-), so that
# it still sees the script go.
exec 4<>"$dir/ready"
bwrap "${root[@]}" --die-with-parent -- \
    xdg-dbus-proxy --fd=3 "$DBUS_SESSION_BUS_ADDRESS" "$dir/bus/socket" --filter \
    '--talk=org.freedesktop.portal.*' '--call=org.freedesktop.portal.*=*' \
    '--broadcast=org.freedesktop.portal.*=@/org/freedesktop/portal/*' "${talk[@]}" 3>"$dir/ready" 4<&- &
proxy_pid=$!
# Waited for in steps of a second, the proxy checked at each: this end being also a writer, a proxy that failed
# (no user namespaces, a bad bus address) would not end the read.
waited=0
until read -r -n 1 -t 1 _ <&4; do
    waited=$((waited + 1))
    if ! kill -0 "$proxy_pid" 2>/dev/null || [ "$waited" -ge 120 ]; then
        echo "sandbox: xdg-dbus-proxy did not start" >&2
        exit 70
    fi
done

# The app: the session's runtime directory (and the real bus socket in it) hidden behind a private one that holds
# only the proxy's socket; no network namespace of the host's (an abstract socket of another bus stays out). Unlike
# flatpak, no PID namespace (the app under test reaches the bus only through DBUS_SESSION_BUS_ADDRESS, the proxy's
# socket). A SIGKILL of this script ends the proxy (--die-with-parent) a moment before the app, which then sees its
# bus refused or closed: VaultCrashTests(portal) counts that as the operation in flight; with --unshare-pid the app
# outlives the proxy longer (its namespace's init dies first), so it is seen more often.
status=0
bwrap "${root[@]}" --unshare-net --die-with-parent \
    --tmpfs "$XDG_RUNTIME_DIR" --bind "$dir/bus/socket" "$XDG_RUNTIME_DIR/bus" \
    --setenv DBUS_SESSION_BUS_ADDRESS "unix:path=$XDG_RUNTIME_DIR/bus" --setenv FLATPAK_ID "$app_id" \
    -- "$@" || status=$?
exit "$status"
