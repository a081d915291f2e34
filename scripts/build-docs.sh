#!/usr/bin/env bash
# `make docs`: the DocC archives of PrefsKV and SecureVault, built with the toolchain's docc from the catalogs
# (Sources/<module>/<module>.docc) and the modules' public symbol graphs. No swift-docc-plugin dependency, so
# an app that depends on this package fetches nothing more. Fails on any DocC warning (a broken link, a
# symbol that does not exist).
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
graphs=.build/symbol-graphs
# The graphs are kept between runs: an incremental build emits graphs only for the modules it recompiles.
rm -rf .build/docs "$graphs/PrefsKV" "$graphs/SecureVault"
mkdir -p "$graphs" .build/docs
# A separate scratch path: the symbol-graph flags must not invalidate the main build.
"$swift" build --scratch-path .build-docs --target SecureVault \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" \
    -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public 2>&1 | grep -v 'prohibited flag(s): -pthread' | tail -1
docc=$(dirname "$(command -v "$swift")")/docc
[ -x "$docc" ] || docc=$(command -v docc)
for module in PrefsKV SecureVault; do
    only="$graphs/$module"
    mkdir -p "$only"
    cp "$graphs/$module.symbols.json" "$only/"
    cp "$graphs/$module@"*.symbols.json "$only/" 2>/dev/null || true
    log=$(mktemp)
    "$docc" convert "Sources/$module/$module.docc" --additional-symbol-graph-dir "$only" \
        --fallback-display-name "$module" --fallback-bundle-identifier "dev.securevault.$module" \
        --output-path ".build/docs/$module.doccarchive" >"$log" 2>&1 || { cat "$log"; exit 1; }
    if grep -q "warning:" "$log"; then
        grep -B1 -A3 "warning:" "$log" >&2
        echo "build-docs: DocC warned about $module (above); fix the catalog or the doc comments" >&2
        exit 1
    fi
    rm -f "$log"
    echo "build-docs: .build/docs/$module.doccarchive"
done
