import ArgumentParser
import FoundationEssentials
import PrefsKV
import PrefsKVMMKV

extension Prefs {
    /// `vaultctl prefs import STORE FILE [--from export|json|zustand|mmkv] [--name NAME] [--replace] [--dry-run]`
    /// `[--types FILE] [--crypt-key-fd N] [--aes256] [--salvage]`
    struct ImportCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract:
                "Bring entries in from a `prefs export` document, a JSON settings file, a Zustand payload or MMKV.",
            discussion: """
                --from export (the default) accepts exactly what `prefs export` prints (from any store id); the \
                store then holds exactly the document's entries, in one transaction, and is created if it does \
                not exist. Entries that have already expired are skipped. A document that is not an export exits \
                64 and changes (or creates) nothing.

                --from json takes a flat JSON object (electron-store's config.json, a settings file): true/false \
                become bool keys, integers int, other numbers double, strings string, arrays of strings strings, \
                anything else json (its JSON text: read it with the library's decode(_:forKey:)); null is skipped. --from zustand takes a \
                Zustand persist payload {"state": ..., "version": n} and stores it as the PersistedState --name \
                NAME at version n, so that the app's migration runs on it at its first hydration. Both write in \
                one transaction, leave a key that already holds the value (unchanged) and keep one the store holds \
                another value for (kept; --replace overwrites), so running them again changes nothing and says \
                so. --dry-run says what would change and writes nothing. FILE is only read; - is standard input.

                --from mmkv takes an MMKV store, FILE being its data file <dir>/<mmapID> (its meta file \
                <mmapID>.crc beside it), as --from json does (one transaction, unchanged, kept, --replace, \
                --dry-run): MMKV's log is replayed (the last record of a key wins, an empty value deletes), keys \
                whose auto-expiry passed are dropped (expired) and the others keep their expiry. MMKV stores no \
                types: --types TYPES names a JSON file {"key or pattern*": "type"} with types bool, int32, int64, \
                uint32, uint64, float, double, string, bytes, strings (a key matches itself first, then the longest \
                pattern); a key without one comes in as bytes, MMKV's encoding as it is, and is listed (untyped). \
                An encrypted store's crypt key is read from descriptor N (--crypt-key-fd N, e.g. 3<key-file; \
                AES-128, or --aes256). A checksum that does not match, a truncated file or a record that does not \
                parse exits 65 naming the file and offset (78 wrongKey when an encrypted log whose checksum matches \
                does not parse) and writes nothing; --salvage keeps the records that parse (unreadableFrom says \
                where they stopped).

                JSON (--from export): {"store": "ui", "path": "...", "imported": 3, "created": false}. \
                (--from json or zustand): {"store": "ui", "path": "...", "from": "json", "created": false, \
                "dryRun": false, "imported": ["theme"], "unchanged": [], "kept": [], "skipped": [], \
                "expired": [], "untyped": [], "unreadableFrom": null, "types": {"theme": "string"}} (--from mmkv \
                the same).

                On a terminal, a long import prints a progress line on stderr every second (what it is doing, \
                keys checked of all, seconds so far); nothing when stderr is not a terminal.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The document, or - for standard input.")
        var file: String

        enum Source: String, ExpressibleByArgument, CaseIterable {
            case export, json, zustand, mmkv
        }

        @Option(help: ArgumentHelp("What FILE is: export, json, zustand or mmkv.", valueName: "kind"))
        var from: Source = .export

        @Option(help: ArgumentHelp("With --from zustand: the PersistedState's name.", valueName: "name"))
        var name: String?

        @Flag(help: "With --from json, zustand or mmkv: overwrite keys the store holds another value for.")
        var replace = false

        @Flag(
            name: .customLong("dry-run"),
            help: "With --from json, zustand or mmkv: say what would change, write nothing.")
        var dryRun = false

        @Option(
            help: ArgumentHelp(
                "With --from mmkv: a JSON file {\"key or pattern*\": \"type\"} of the MMKV values' types.",
                valueName: "file"))
        var types: String?

        @Option(
            name: .customLong("crypt-key-fd"),
            help: ArgumentHelp("With --from mmkv: read the store's crypt key from descriptor N.", valueName: "N"))
        var cryptKeyFD: Int32?

        @Flag(help: "With --crypt-key-fd: the store was encrypted with AES-256 (MMKV's aes256 option).")
        var aes256 = false

        @Flag(help: "With --from mmkv: keep the records that parse from a damaged file instead of refusing it.")
        var salvage = false

        func checkArguments() throws {
            if from == .zustand, name == nil {
                throw CLIFailure.usage("--from zustand needs --name NAME: the PersistedState the payload becomes")
            }
            if from != .zustand, name != nil { throw CLIFailure.usage("--name goes with --from zustand only") }
            if from == .export, replace || dryRun {
                throw CLIFailure.usage(
                    "--replace and --dry-run go with --from json, zustand or mmkv (an export replaces the store)")
            }
            if from != .mmkv, types != nil || cryptKeyFD != nil || salvage {
                throw CLIFailure.usage("--types, --crypt-key-fd and --salvage go with --from mmkv only")
            }
            if aes256, cryptKeyFD == nil { throw CLIFailure.usage("--aes256 goes with --crypt-key-fd") }
            if from == .mmkv, file == "-" {
                throw CLIFailure.usage("--from mmkv reads MMKV's files: FILE is the data file's path, not -")
            }
        }

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            if from == .mmkv { return try importSettings(Data(), source: file, target: target) }
            let document = try readInput(file)
            let source = file == "-" ? "standard input" : file
            guard from == .export else { return try importSettings(document, source: source, target: target) }
            do {
                try PrefsStore.validateExport(document)
            } catch let error as PrefsError {
                throw CLIFailure(error, message: "cannot import \(source) into store \"\(store)\": \(error.message)")
            }
            let created = !target.exists
            let opened = try target.open(creating: true)
            let progress = ProgressLines.start("importing \(source) into store \(store)", phase: "writing")
            defer { progress.finish() }
            try opened.importJSON(document)
            let count = try opened.count
            return Answer(
                json: Report(store: store, path: target.dataPath, imported: count, created: created),
                human: "imported \(plural(count, "entry", "entries")) into store \(store) (\(target.dataPath))")
        }

        /// `--from json` and `--from zustand`: the document is checked before a store is opened (or created).
        private func importSettings(_ document: Data, source: String, target: StoreTarget) throws -> Answer {
            let created = !target.exists
            let report: PrefsImportReport
            let options = try from == .mmkv ? mmkvOptions() : nil
            let progress = ProgressLines.start("importing \(source) into store \(store)", phase: "checking")
            defer { progress.finish() }
            do {
                // MMKV's files are read once: the check and the import write the same values.
                let mmkv = try options.map {
                    try MMKVImport.read(path: file, cryptKey: $0.cryptKey, types: $0.types, salvage: salvage)
                }
                // Checked first as a dry run (against an empty temporary store when there is none yet), so that a
                // bad document creates no store and a dry run creates nothing.
                let check = try importing(
                    document, mmkv: mmkv, into: created ? try PrefsStore.temporary() : try target.open(), dryRun: true,
                    progress: progress)
                progress.phase("importing")
                report =
                    dryRun
                    ? check
                    : try importing(
                        document, mmkv: mmkv, into: try target.open(creating: true), dryRun: false, progress: progress)
            } catch let error as PrefsError
                where [.invalidInput, .invalidKey, .valueTooLarge].contains(error.code)
                || (from == .mmkv && (error.path == file || error.path == file + ".crc"))
            {
                let hint = error.code == .encrypted ? " with --crypt-key-fd N (e.g. --crypt-key-fd 3 3<key-file)" : ""
                throw CLIFailure(
                    error, message: "cannot import \(source) into store \"\(store)\": \(error.message)\(hint)")
            }
            let verb = dryRun ? "would import" : "imported"
            var human = "\(verb) \(plural(report.imported.count, "key")) into store \(store) (\(target.dataPath))"
            if !report.unchanged.isEmpty { human += "; \(report.unchanged.count) unchanged" }
            if !report.kept.isEmpty {
                human +=
                    "; kept \(report.kept.count) the store holds another value for (--replace overwrites): "
                    + report.kept.joined(separator: ", ")
            }
            if !report.skipped.isEmpty {
                human += "; skipped \(report.skipped.count) null: " + report.skipped.joined(separator: ", ")
            }
            if !report.expired.isEmpty {
                human += "; skipped \(report.expired.count) expired: " + report.expired.joined(separator: ", ")
            }
            if !report.untyped.isEmpty {
                human +=
                    "; \(report.untyped.count) without a type came in as bytes (--types names theirs): "
                    + report.untyped.joined(separator: ", ")
            }
            if let offset = report.unreadableFrom {
                human += "; records stopped parsing at offset \(offset) (--salvage kept those before it)"
            }
            return Answer(
                json: SettingsReport(
                    store: store, path: target.dataPath, from: from.rawValue, created: created && !dryRun,
                    dryRun: dryRun, imported: report.imported, unchanged: report.unchanged, kept: report.kept,
                    skipped: report.skipped, expired: report.expired, untyped: report.untyped,
                    unreadableFrom: report.unreadableFrom, types: report.types),
                human: human)
        }

        /// What `--from mmkv` reads besides FILE: the types file and the crypt key.
        private struct MMKVOptions {
            var types: [String: MMKVType]
            var cryptKey: MMKVCryptKey?
        }

        private func mmkvOptions() throws -> MMKVOptions {
            var options = MMKVOptions(types: [:])
            if let types {
                let text = try readInput(types)
                guard let object = try? JSONDecoder().decode([String: String].self, from: text) else {
                    throw CLIFailure.usage("--types \(types): not a JSON object of type names {\"key\": \"int32\"}")
                }
                for (key, name) in object {
                    guard let type = MMKVType(name: name) else {
                        throw CLIFailure.usage(
                            "--types \(types): \"\(name)\" (for \"\(key)\") is no MMKV type; the types are "
                                + MMKVType.names.joined(separator: ", "))
                    }
                    options.types[key] = type
                }
            }
            if let cryptKeyFD {
                var key = try VaultOptions.readSecret(from: cryptKeyFD, option: "--crypt-key-fd", what: "crypt key")
                defer { wipe(&key) }
                guard !key.isEmpty else { throw CLIFailure.usage("the crypt key is empty; nothing was done") }
                options.cryptKey = aes256 ? .aes256(key) : .aes128(key)
            }
            return options
        }

        private func importing(
            _ document: Data, mmkv: MMKVImport?, into store: PrefsStore, dryRun: Bool, progress: ProgressLines
        ) throws -> PrefsImportReport {
            let update = { (done: Int, total: Int) in progress.update(done: done, total: total) }
            switch from {
            case .mmkv:
                guard let mmkv else { preconditionFailure("--from mmkv reads its files first") }
                return try store.importMMKV(mmkv, replacing: replace, dryRun: dryRun, progress: update)
            case .json:
                return try store.importJSONObject(document, replacing: replace, dryRun: dryRun, progress: update)
            case .zustand:
                return try store.importPersistedState(document, as: name ?? "", replacing: replace, dryRun: dryRun)
            case .export: preconditionFailure("an export is imported by answer(store:console:)")
            }
        }

        /// The `--json` answer of `--from export`.
        struct Report: Encodable {
            var store: String
            var path: String
            var imported: Int
            var created: Bool
        }

        /// The `--json` answer of `--from json` and `--from zustand`.
        struct SettingsReport: Encodable {
            var store: String
            var path: String
            var from: String
            var created: Bool
            var dryRun: Bool
            var imported: [String]
            var unchanged: [String]
            var kept: [String]
            var skipped: [String]
            var expired: [String]
            var untyped: [String]
            @Nullable var unreadableFrom: Int?
            var types: [String: String]
        }
    }
}
