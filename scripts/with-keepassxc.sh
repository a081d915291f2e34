#!/usr/bin/env bash
# Run a command inside a private D-Bus session bus whose Secret Service is KeePassXC, headless, on a throwaway
# HOME with a fresh database exposed over the Secret Service.
#
#   scripts/with-keepassxc.sh [--defaults | --unattended | --confirm-delete] COMMAND [ARGUMENTS...]
#
#   --defaults    KeePassXC as its users have it (the default): every D-Bus client must be approved for each
#                 item (ConfirmAccessItem), a search with every database locked asks to unlock one
#                 (UnlockBeforeSearch), a delete asks "delete for good?" when the recycle bin is off
#                 (ConfirmDeleteItem), and the database's recycle bin is on.
#   --unattended  the settings that suit a server or a test: no access approval, no unlock before search, no
#                 delete confirmation, and the database's recycle bin off.
#   --confirm-delete  a user who turned the recycle bin off (deletes are final) and kept the other defaults but
#                 the access approval: every delete then asks "delete for good?".
#
# For tests only: on a desktop the library talks to the user's own Secret Service. The bus has no service
# directory, so nothing else (gnome-keyring) can be activated on it. The session, its HOME and KeePassXC are
# gone when the command exits.
#
# Inside the command these are set:
#   VAULT_TEST_KEEPASSXC=defaults|unattended|confirm-delete   which settings KeePassXC runs with
#   VAULT_TEST_KEEPASSXC_DB, _PASSWORD, _PID  the database, its password, and KeePassXC's process
#   VAULT_TEST_KEEPASSXC_START                a command that starts KeePassXC again (after a test killed it)
set -euo pipefail
# shellcheck source=bare-bus.conf.sh
. "$(dirname "$0")/bare-bus.conf.sh"

mode=defaults
case "${1:-}" in
    --defaults) mode=defaults; shift ;;
    --unattended) mode=unattended; shift ;;
    --confirm-delete) mode=confirm-delete; shift ;;
esac
if [ $# -eq 0 ]; then
    echo "usage: $0 [--defaults | --unattended | --confirm-delete] COMMAND [ARGUMENTS...]" >&2
    exit 64
fi
for tool in keepassxc keepassxc-cli dbus-run-session gdbus; do
    command -v "$tool" >/dev/null 2>&1 || { echo "with-keepassxc: $tool is not installed (make test installs it)" >&2; exit 69; }
done

here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${_VAULT_IN_KEEPASSXC_BUS:-}" ]; then
    export _VAULT_IN_KEEPASSXC_BUS=$mode
    home=$(mktemp -d "${TMPDIR:-/tmp}/vault-keepassxc.XXXXXX")
    trap 'rm -rf "$home"' EXIT
    export HOME="$home"
    export XDG_DATA_HOME="$home/.local/share"
    export XDG_CONFIG_HOME="$home/.config"
    export XDG_CACHE_HOME="$home/.cache"
    export XDG_RUNTIME_DIR="$home/.run"
    mkdir -p "$XDG_DATA_HOME" "$XDG_CONFIG_HOME/keepassxc" "$XDG_CACHE_HOME"
    mkdir -m 700 -p "$XDG_RUNTIME_DIR"
    unset DISPLAY WAYLAND_DISPLAY GNOME_KEYRING_CONTROL SSH_AUTH_SOCK DBUS_SESSION_BUS_ADDRESS
    password="test-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
    export VAULT_TEST_KEEPASSXC_PASSWORD="$password"
    export VAULT_TEST_KEEPASSXC_DB="$home/vault-test.kdbx"

    # A database whose root group is exposed over the Secret Service. keepassxc-cli cannot set that, so the
    # database goes through XML: export, add the custom data KeePassXC reads, import.
    printf '%s\n%s\n' "$password" "$password" | keepassxc-cli db-create -q -p "$home/empty.kdbx" >/dev/null 2>&1
    printf '%s\n' "$password" | keepassxc-cli export -q -f xml "$home/empty.kdbx" >"$home/db.xml" 2>/dev/null
    root=$(sed -n '/<Root>/,/<\/UUID>/p' "$home/db.xml" | sed -n 's/.*<UUID>\(.*\)<\/UUID>.*/\1/p' | head -n1)
    root_hex=$(printf '%s' "$root" | base64 -d | od -An -tx1 | tr -d ' \n')
    [ ${#root_hex} -eq 32 ] || { echo "with-keepassxc: no root group in the exported database" >&2; exit 1; }
    # KeePassXC keeps the group as QUuid::toString() writes it: {8-4-4-4-12}.
    root_uuid="{${root_hex:0:8}-${root_hex:8:4}-${root_hex:12:4}-${root_hex:16:4}-${root_hex:20:12}}"
    recycle=True
    [ "$mode" != defaults ] && recycle=False
    sed -i -e "s|<RecycleBinEnabled>True</RecycleBinEnabled>|<RecycleBinEnabled>$recycle</RecycleBinEnabled>|" \
        -e "s|</Meta>|<CustomData><Item><Key>FDO_SECRETS_EXPOSED_GROUP</Key><Value>$root_uuid</Value></Item></CustomData></Meta>|" \
        "$home/db.xml"
    printf '%s\n%s\n' "$password" "$password" | keepassxc-cli import -q -p "$home/db.xml" "$VAULT_TEST_KEEPASSXC_DB" >/dev/null 2>&1
    rm -f "$home/empty.kdbx" "$home/db.xml"

    confirm=true access=true
    [ "$mode" = unattended ] && confirm=false
    [ "$mode" != defaults ] && access=false
    cat >"$XDG_CONFIG_HOME/keepassxc/keepassxc.ini" <<INI
[General]
SingleInstance=false
ConfigVersion=2

[GUI]
MinimizeOnStartup=true
CheckForUpdates=false

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmAccessItem=$access
ConfirmDeleteItem=$confirm
UnlockBeforeSearch=$confirm
INI

    # A session bus configuration without <servicedir>: nothing can be activated on it.
    write_bare_bus_config "$home/bus.conf" "$home"
    status=0
    dbus-run-session --config-file="$home/bus.conf" -- "$0" "$@" 2> >(grep --line-buffered -v 'Failed to set fd limit' >&2) \
        || status=$?
    exit "$status"
fi

# Inside the bus. Starts KeePassXC with the database unlocked and waits until its default collection is
# unlocked (the bus name is taken about 0.3 s before the database is); prints KeePassXC's pid.
start_keepassxc() {
    # After a test killed it: until the bus has dropped the dead process's name, a new KeePassXC could not take it.
    local free=$((SECONDS + 120))
    while [ "$SECONDS" -lt "$free" ] && gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
        --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets 2>/dev/null | grep -q true; do
        sleep 0.05
    done
    printf '%s\n' "$VAULT_TEST_KEEPASSXC_PASSWORD" \
        | QT_QPA_PLATFORM=offscreen setsid keepassxc --pw-stdin "$VAULT_TEST_KEEPASSXC_DB" \
            >"$HOME/keepassxc.log" 2>&1 &
    local pid=$!
    # 120 s only guards against a hang: on a loaded machine KeePassXC's start (Qt, then the database's key
    # derivation) can take many seconds.
    local end=$((SECONDS + 120))
    while [ "$SECONDS" -lt "$end" ]; do
        local alias
        alias=$(gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
            --method org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null || true)
        alias=$(printf '%s' "$alias" | sed -n "s/.*objectpath '\([^']*\)'.*/\1/p")
        if [ -n "$alias" ] && [ "$alias" != / ]; then
            if gdbus call --session --dest org.freedesktop.secrets --object-path "$alias" \
                --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked 2>/dev/null \
                | grep -q false; then
                echo "$pid"
                return 0
            fi
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "with-keepassxc: KeePassXC did not expose an unlocked collection within 120 s; its log:" >&2
    cat "$HOME/keepassxc.log" >&2 || true
    kill -9 "$pid" 2>/dev/null || true
    return 1
}

if [ "${1:-}" = --start-keepassxc ]; then
    start_keepassxc
    exit $?
fi

pid=$(start_keepassxc)
export VAULT_TEST_KEEPASSXC="$_VAULT_IN_KEEPASSXC_BUS"
export VAULT_TEST_KEEPASSXC_PID="$pid"
export VAULT_TEST_KEEPASSXC_START="$here/$(basename "$0") --start-keepassxc"
status=0
"$@" || status=$?
# SIGTERM often leaves KeePassXC running; the tests may have started another one.
kill -9 "$pid" 2>/dev/null || true
pkill -9 -f "keepassxc --pw-stdin $VAULT_TEST_KEEPASSXC_DB" 2>/dev/null || true
exit "$status"
