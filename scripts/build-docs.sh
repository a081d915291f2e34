#!/usr/bin/env bash
# `make docs`: the DocC archives of PrefsKV and SecureVault, built with the toolchain's docc from the catalogs
# (Sources/<module>/<module>.docc) and the modules' public symbol graphs. No swift-docc-plugin dependency, so
# an app that depends on this package fetches nothing more. Fails on any DocC warning (a broken link, a
# symbol that does not exist).
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
scratch=.build-docs
graphs=$scratch/symbol-graphs
docc=$(dirname "$(command -v "$swift")")/docc
[ -x "$docc" ] || docc=$(command -v docc || true)
[ -n "$docc" ] || { echo "build-docs: no docc beside $swift or on PATH (it comes with the Swift toolchain)" >&2; exit 1; }

build_graphs() {
    # A scratch path of its own: the symbol-graph flags must not invalidate the main build. A module is given
    # a graph only when it is compiled, so a build that finds nothing to do is started over.
    local log
    log=$(mktemp)
    if ! "$swift" build --scratch-path "$scratch" --target SecureVault \
        -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" \
        -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
}
mkdir -p "$graphs"
build_graphs
if [ ! -f "$graphs/PrefsKV.symbols.json" ] || [ ! -f "$graphs/SecureVault.symbols.json" ]; then
    rm -rf "$scratch"
    mkdir -p "$graphs"
    build_graphs
fi
rm -rf .build/docs
mkdir -p .build/docs
for module in PrefsKV SecureVault; do
    only="$graphs/only-$module"
    rm -rf "$only"
    mkdir -p "$only"
    cp "$graphs/$module.symbols.json" "$only/"
    cp "$graphs/$module@"*.symbols.json "$only/" 2>/dev/null || true
    log=$(mktemp)
    "$docc" convert "Sources/$module/$module.docc" --additional-symbol-graph-dir "$only" \
        --fallback-display-name "$module" --fallback-bundle-identifier "dev.securevault.$module" \
        --output-path ".build/docs/$module.doccarchive" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    if grep -q "warning:" "$log"; then
        grep -B1 -A3 "warning:" "$log" >&2
        echo "build-docs: DocC warned about $module (above); fix the catalog or the doc comments" >&2
        exit 1
    fi
    rm -f "$log"
    echo "build-docs: .build/docs/$module.doccarchive"
done
