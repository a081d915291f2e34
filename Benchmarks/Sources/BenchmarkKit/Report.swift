// Markdown tables from the results: medians and spreads, ratios from the same rounds, memory and file sizes.
import FoundationEssentials

public enum Report {
    /// MMKV 2.4 figures from DESIGN.md section 7, measured separately on this machine class (not in this run).
    static let mmkv: [(String, String, String)] = [
        ("set int", "570 ns", "1,010 ns"),
        ("set 64-byte string", "1,060 ns", "2,360 ns"),
        ("overwrite 100 hot keys", "610 ns", "740 ns"),
        ("get int", "58 ns", "60 ns"),
        ("cold open + first read, 10,000 ints", "1.5 ms", "2.6 ms"),
        ("cold open + first read, 10 keys", "0.12 ms", "0.13 ms"),
    ]

    public static func markdown(_ r: Results) -> String {
        var out: [String] = []
        out.append("# PrefsKV and SecureVault against SQLite, LMDB and libsecret")
        out.append("")
        out.append(
            "Mode: \(r.quick ? "quick (small counts, one round: checks the harness, not the figures)" : "full"); "
                + "\(r.scale.repetitions) round(s); run took \(fixed(r.elapsedSeconds, 0)) s.")
        for (key, value) in r.machine.sorted(by: { $0.key < $1.key }) where key != "scratch directory" {
            out.append("- \(key): \(value)")
        }
        for n in r.notes { out.append("- note: \(n)") }
        out.append("")
        out.append(
            "Times are per operation, the median over fresh worker processes (min-max in brackets). Ratios are "
                + "PrefsKV's time over the other's, the median of the ratios of each round (engines run back to back "
                + "in a round): below 1 means PrefsKV is faster.")

        let prefsVariants = ["prefskv", "prefskv-single", "prefskv-encrypted"]
        section(
            &out, r, .writes, "Writes, buffered durability (process-crash safe; not power-loss safe)",
            engines: Orchestrator.writeEngines.map(\.rawValue), prefs: prefsVariants + ["prefskv-observed"],
            against: ["sqlite", "sqlite-one-txn", "lmdb-nosync"])
        section(
            &out, r, .reads, "Reads: every key once per pass, shuffled order, in a process that opened the store",
            engines: Orchestrator.getEngines.map(\.rawValue), prefs: prefsVariants + ["prefskv-encrypted-cached"],
            against: ["sqlite", "lmdb-nosync"])
        section(
            &out, r, .cold,
            "Cold open + first read in a new process (page cache warm): from before the open to after the read",
            engines: Orchestrator.readEngines.map(\.rawValue), prefs: prefsVariants, against: ["sqlite", "lmdb-nosync"],
            wall: true)
        section(
            &out, r, .strict, "Strictest durability (each write survives power loss once it returns)",
            engines: Orchestrator.strictEngines.map(\.rawValue), prefs: ["prefskv-synchronous"],
            against: ["sqlite-full", "lmdb-sync"])
        section(
            &out, r, .multiProcess, "Reads in one process while another process writes (about every 100 µs)",
            engines: Orchestrator.multiProcessEngines.map(\.rawValue), prefs: ["prefskv"],
            against: ["sqlite", "lmdb-nosync"], extraColumn: ("writes by the writer", "writerWrites"))
        vault(&out, r)

        out.append("")
        out.append("### For context: MMKV 2.4, from DESIGN.md section 7 (measured separately, not in this run)")
        out.append("")
        out.append("| workload | MMKV | MMKV encrypted |")
        out.append("|---|---|---|")
        for (w, a, b) in mmkv { out.append("| \(w) | \(a) | \(b) |") }
        out.append("")
        return out.joined(separator: "\n")
    }

    static func workloads(_ r: Results, _ s: Section) -> [(Workload, String)] {
        var seen: [(Workload, String)] = []
        for row in r.rows where row.section == s && !seen.contains(where: { $0 == (row.workload, row.label) }) {
            seen.append((row.workload, row.label))
        }
        return seen
    }

    static func section(
        _ out: inout [String], _ r: Results, _ s: Section, _ title: String, engines: [String], prefs: [String],
        against: [String], wall: Bool = false, extraColumn: (String, String)? = nil
    ) {
        let items = workloads(r, s)
        guard !items.isEmpty else { return }
        out.append("")
        out.append("## \(title)")
        out.append("")
        out.append("| workload | " + engines.joined(separator: " | ") + " |")
        out.append("|---|" + engines.map { _ in "---:|" }.joined())
        for (w, label) in items {
            let cells = engines.map { e in r.row(s, w, label, e).map { cell($0.samples) } ?? "" }
            out.append("| \(w.title) (\(label)) | " + cells.joined(separator: " | ") + " |")
        }
        if wall {
            out.append("")
            out.append("Whole process, spawn to exit, as the parent saw it (the same processes):")
            out.append("")
            out.append("| workload | " + engines.joined(separator: " | ") + " |")
            out.append("|---|" + engines.map { _ in "---:|" }.joined())
            for (w, label) in items {
                let cells = engines.map { e in r.row(s, w, label, e).map { cell($0.wallSamples) } ?? "" }
                out.append("| \(w.title) (\(label)) | " + cells.joined(separator: " | ") + " |")
            }
        }
        out.append("")
        out.append("Ratios (PrefsKV / other, same rounds):")
        out.append("")
        out.append("| workload | PrefsKV | " + against.map { "/ \($0)" }.joined(separator: " | ") + " |")
        out.append("|---|---|" + against.map { _ in "---:|" }.joined())
        for (w, label) in items {
            for p in prefs {
                guard let mine = r.row(s, w, label, p) else { continue }
                let cells = against.map { other -> String in
                    guard let theirs = r.row(s, w, label, other) else { return "" }
                    return ratio(mine.samples, theirs.samples)
                }
                out.append("| \(w.title) (\(label)) | \(p) | " + cells.joined(separator: " | ") + " |")
            }
        }
        out.append("")
        out.append("Memory and files (medians):")
        out.append("")
        let extraHeader = extraColumn.map { " \($0.0) |" } ?? ""
        out.append("| workload | engine | allocations / op | peak RSS of the process | file size after |" + extraHeader)
        out.append("|---|---|---:|---:|---:|" + (extraColumn == nil ? "" : "---:|"))
        for (w, label) in items {
            for e in engines {
                guard let row = r.row(s, w, label, e) else { continue }
                let allocations = median(row.allocationsPerOperation).map { fixed($0, 2) } ?? ""
                let rss = median(row.peakRSSKiB.map(Double.init)).map { fixed($0 / 1024, 1) + " MiB" } ?? ""
                let size = median(row.fileBytes.map(Double.init)).map { bytes(Int($0)) } ?? ""
                var line = "| \(w.title) (\(label)) | \(e) | \(allocations) | \(rss) | \(size) |"
                if let (_, key) = extraColumn {
                    line += " " + (median(row.extra[key] ?? []).map { grouped(Int($0)) } ?? "") + " |"
                }
                out.append(line)
            }
        }
    }

    static func vault(_ out: inout [String], _ r: Results) {
        let rows = r.rows.filter { $0.section == .vault }
        guard !rows.isEmpty else { return }
        out.append("")
        out.append("## SecureVault")
        out.append("")
        out.append("| what | median (min-max) | allocations / op | notes |")
        out.append("|---|---:|---:|---|")
        for row in rows {
            var notes = ""
            if let inProcess = median(row.extra["inProcessNs"] ?? []) {
                notes = "in-process part (Vault(...) to the answer): \(time(inProcess))"
            }
            if let newItem = median(row.extra["newItemNs"] ?? []) {
                notes = "each overwrite compacts (no old copy stays); a new item: \(time(newItem))"
            }
            if let seal = median(row.extra["sealNs"] ?? []), let open = median(row.extra["openNs"] ?? []) {
                notes = "seal \(time(seal)), open \(time(open))"
            }
            let allocations =
                row.workload == .cold ? "" : median(row.allocationsPerOperation).map { fixed($0, 1) } ?? ""
            out.append("| \(row.engine) (\(row.label)) | \(cell(row.samples)) | \(allocations) | \(notes) |")
        }
        let perStore = perStoreRatios(r)
        if !perStore.isEmpty {
            out.append("")
            out += perStore
        }
        let cold = { (name: String) in r.row(.vault, .cold, "new process", name)?.samples ?? [] }
        let vault = cold(VaultBench.vaultCold)
        if !vault.isEmpty {
            out.append("")
            out.append(
                "Cold token read, whole new process, same rounds: SecureVault / bare libsecret lookup = "
                    + "\(ratio(vault, cold(VaultBench.bareLookup))) (target: within 1.2x); "
                    + "SecureVault / secret-tool lookup = \(ratio(vault, cold(VaultBench.secretTool))).")
            // The same, less what starting each kind of process costs (a Swift process loads the Swift runtime
            // and Foundation before main; a C process does not).
            let swiftStart = cold(VaultBench.noopSwift)
            let cStart = cold(VaultBench.noopC)
            let bare = cold(VaultBench.bareLookup)
            let n = [vault.count, swiftStart.count, cStart.count, bare.count].min() ?? 0
            if n > 0 {
                let netVault = (0..<n).map { vault[$0] - swiftStart[$0] }
                let netBare = (0..<n).map { bare[$0] - cStart[$0] }
                out.append(
                    "Net of process start (each round's empty Swift process taken from the vault's time, its empty C "
                        + "process from the bare lookup's): SecureVault \(cell(netVault)), bare lookup "
                        + "\(cell(netBare)), ratio \(ratio(netVault, netBare)).")
            }
            let linkedIn = cold(VaultBench.vaultColdStatic)
            if !linkedIn.isEmpty {
                out.append(
                    "The same read built as the README advises an app to be (`--static-swift-stdlib`: the Swift runtime "
                        + "and Foundation linked in, libsecret and GLib shared), whole new process, same rounds: "
                        + "SecureVault \(cell(linkedIn)) / bare libsecret lookup = \(ratio(linkedIn, bare)) (target: "
                        + "within 1.2x); its empty process \(cell(cold(VaultBench.noopSwiftStatic))).")
            }
        }
    }

    /// One line per headless key store: its cold token read against the bare read of the same key.
    static func perStoreRatios(_ r: Results) -> [String] {
        let cold = { (name: String) in r.row(.vault, .cold, "new process", name)?.samples ?? [] }
        var lines: [String] = []
        for row in VaultBench.perStore {
            let vault = cold(row.vault)
            let bare = cold(row.bare)
            guard !vault.isEmpty, !bare.isEmpty else { continue }
            let inProcess = r.row(.vault, .cold, "new process", row.vault)?.extra["inProcessNs"] ?? []
            lines.append(
                "Cold token read, \(row.store): whole new process SecureVault \(cell(vault)) / \(row.bare) "
                    + "\(cell(bare)) = \(ratio(vault, bare)); SecureVault's own part (Vault(...) to the answer, in "
                    + "its process) \(cell(inProcess)) / \(row.bare)'s whole process = \(ratio(inProcess, bare)) "
                    + "(target: within 1.2x).")
        }
        let portalVault = cold(VaultBench.portalVault)
        let portalBare = cold(VaultBench.portalBare)
        if !portalVault.isEmpty, !portalBare.isEmpty {
            let inProcess = { (name: String) in r.row(.vault, .cold, "new process", name)?.extra["inProcessNs"] ?? [] }
            lines.append(
                "Cold token read, Secret portal, in a Flatpak sandbox: SecureVault's own part (Vault(...) to the "
                    + "answer) \(cell(inProcess(VaultBench.portalVault))) / the bare RetrieveSecret's (bus connection "
                    + "to the secret read) \(cell(inProcess(VaultBench.portalBare))) = "
                    + "\(ratio(inProcess(VaultBench.portalVault), inProcess(VaultBench.portalBare))) (target: within "
                    + "1.2x); whole sandboxed process (bwrap and xdg-dbus-proxy started each time) \(cell(portalVault)) / "
                    + "\(cell(portalBare)) = \(ratio(portalVault, portalBare)).")
        }
        if !lines.isEmpty {
            lines.append(
                "A whole new process of SecureVault includes starting a Swift program (the empty Swift process above); "
                    + "the bare tools are small C programs.")
        }
        return lines
    }

    static func cell(_ samples: [Double]) -> String {
        guard let s = Summary(samples) else { return "" }
        return s.count == 1 ? time(s.median) : "\(time(s.median)) (\(time(s.minimum))-\(time(s.maximum)))"
    }

    /// The median of per-round ratios (samples at the same index come from the same round).
    static func ratio(_ mine: [Double], _ theirs: [Double]) -> String {
        let n = min(mine.count, theirs.count)
        guard n > 0 else { return "" }
        let ratios = (0..<n).compactMap { theirs[$0] > 0 ? mine[$0] / theirs[$0] : nil }
        guard let m = median(ratios) else { return "" }
        return m >= 10 ? fixed(m, 0) + "x" : fixed(m, 2) + "x"
    }

    static func time(_ ns: Double) -> String {
        if ns < 1_000 { return fixed(ns, 0) + " ns" }
        if ns < 1_000_000 { return fixed(ns / 1_000, ns < 10_000 ? 2 : 1) + " µs" }
        if ns < 1_000_000_000 { return fixed(ns / 1_000_000, ns < 10_000_000 ? 2 : 1) + " ms" }
        return fixed(ns / 1e9, 2) + " s"
    }

    /// `x` with `digits` decimals (FoundationEssentials has no String(format:)).
    static func fixed(_ x: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(x) * scale).rounded()
        guard scaled < 9e15 else { return "\(x)" }
        let whole = Int(scaled) / Int(scale)
        let fraction = Int(scaled) % Int(scale)
        var text = (x < 0 && scaled > 0 ? "-" : "") + grouped(whole)
        if digits > 0 {
            let f = String(fraction)
            text += "." + String(repeating: "0", count: digits - f.count) + f
        }
        return text
    }

    static func bytes(_ n: Int) -> String {
        if n < 1024 { return "\(n) B" }
        if n < 1024 * 1024 { return fixed(Double(n) / 1024, 1) + " KiB" }
        return fixed(Double(n) / 1024 / 1024, 1) + " MiB"
    }
}
